"""Ops with several outputs that cut an array into pieces: split(x, num_or_sizes, axis=0)
and unstack(x, axis=0) (SPEC §3.1), as tf.split and tf.unstack.

Each is indexed in an expression (``split(x, 3, axis=1)[0]``, or ``parts = split(x, 2)``
then ``parts[1]``); the registry's docstring says how such an op is declared. split's
``num_or_sizes`` is tf.split's ``num_or_size_splits``: an int is a COUNT of equal pieces
(torch.split's int is a piece's size), a list the pieces' lengths, one of which may be
-1 (what the others leave). The VJP receives one cotangent per piece, zeros for a piece
nothing uses, and joins them back with concat or stack (so the builtin engine records
it, for second order): a piece that is not used gets a zero gradient, not a missing one.
"""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import fmt_shape, normalize_axis
from .registry import Op, Shape, ShapeError, register


def split_sizes(x: Shape, num_or_sizes: object, axis: object) -> list[int]:
    """The pieces' lengths along `axis`, as tf.split cuts them: an int is a COUNT of
    equal pieces (it must divide the axis), a list the lengths (one -1 is inferred)."""
    if not x:
        raise ShapeError("needs rank >= 1, got a scalar")
    at = normalize_axis(axis, len(x))
    size = x[at]
    if num_or_sizes is None:
        raise ShapeError(
            "num_or_sizes is required: a count of equal pieces (split(x, 2)) or their sizes "
            "(split(x, [1, 3]))"
        )
    if isinstance(num_or_sizes, int) and not isinstance(num_or_sizes, bool):
        if num_or_sizes < 1 or size % num_or_sizes:
            raise ShapeError(
                f"num_or_sizes={num_or_sizes}: a count of pieces must be >= 1 and divide "
                f"axis {at} of size {size} (shape {fmt_shape(x)})"
            )
        return [size // num_or_sizes] * num_or_sizes
    items = num_or_sizes if isinstance(num_or_sizes, (list, tuple)) else None
    if not items or any(isinstance(v, bool) or not isinstance(v, int) for v in items):
        raise ShapeError(
            f"num_or_sizes must be an integer count or a non-empty list of integer sizes, "
            f"got {num_or_sizes!r}"
        )
    sizes = list(items)
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        raise ShapeError(f"num_or_sizes={sizes}: sizes are >= 0, with at most one -1")
    known = sum(s for s in sizes if s != -1)
    if -1 in sizes and known <= size:
        sizes[sizes.index(-1)] = size - known
    if -1 in sizes or sum(sizes) != size:  # a -1 left: the others already exceed the axis
        raise ShapeError(
            f"num_or_sizes={list(items)}: the sizes add up to {known}, not to axis {at}'s "
            f"size {size} (shape {fmt_shape(x)})"
        )
    return sizes


def _split_shape(x: Shape, num_or_sizes: object = None, axis: object = 0) -> tuple[Shape, ...]:
    sizes = split_sizes(x, num_or_sizes, axis)
    at = normalize_axis(axis, len(x))
    return tuple((*x[:at], n, *x[at + 1 :]) for n in sizes)


def split_offsets(x, num_or_sizes, axis) -> list[int]:
    """Where the pieces end, but for the last: np.split's indices."""
    sizes = split_sizes(tuple(np.shape(x)), num_or_sizes, axis)
    return [int(o) for o in np.cumsum(sizes)[:-1]]


def _unstack_shape(x: Shape, axis: object = 0) -> tuple[Shape, ...]:
    if not x:
        raise ShapeError("needs rank >= 1, got a scalar")
    at = normalize_axis(axis, len(x))
    return ((*x[:at], *x[at + 1 :]),) * x[at]


def _unstack_count(x: Shape, axis: object = 0) -> int:
    return x[normalize_axis(axis, len(x))]


# The declarations are a table, laid out by hand: one op per block.
# fmt: off
register(Op(
    name="split", params=("x",), attrs={"num_or_sizes": None, "axis": 0},
    shape=_split_shape,
    outputs=lambda x, num_or_sizes=None, axis=0: len(split_sizes(x, num_or_sizes, axis)),
    forward=lambda x, num_or_sizes, axis: tuple(
        np.split(x, split_offsets(x, num_or_sizes, axis), axis=axis)),
    vjps=(lambda gs, ans, x, num_or_sizes, axis: np.concatenate(list(gs), axis=axis),),
    tf=lambda tf, x, num_or_sizes, axis: tuple(tf.split(x, num_or_sizes, axis=axis)),
    tf_name="tf.split",
    doc="x cut along axis into num_or_sizes pieces (an int: that many equal ones, as "
        "tf.split; a list: their sizes); several outputs, indexed: split(x, 2)[1]",
    rules=("np.concatenate(g, axis)",), tf_rules=("tf.concat(g, axis)",),
    jvps=(lambda t, ans, x, num_or_sizes, axis: tuple(
        np.split(t, split_offsets(x, num_or_sizes, axis), axis=axis)),),
    jvp_rules=("tuple(np.split(t, offsets, axis))",),
    tf_jvp_rules=("tuple(tf.split(t, sizes, axis))",),
    torch_jvp_rules=("tuple(torch.split(t, sizes, axis))",),
    attr_choices={"num_or_sizes": (2, 1, [1, -1])},
))
register(Op(
    name="unstack", params=("x",), attrs={"axis": 0}, shape=_unstack_shape,
    outputs=_unstack_count,
    forward=lambda x, axis: tuple(np.moveaxis(x, axis, 0)),
    vjps=(lambda gs, ans, x, axis: np.stack(list(gs), axis=axis),),
    tf=lambda tf, x, axis: tuple(tf.unstack(x, axis=axis)), tf_name="tf.unstack",
    doc="the slices of x along axis, one output each (stack's inverse); indexed: "
        "unstack(x)[0]",
    rules=("np.stack(g, axis)",), tf_rules=("tf.stack(g, axis)",),
    jvps=(lambda t, ans, x, axis: tuple(np.moveaxis(t, axis, 0)),),
    jvp_rules=("tuple(np.moveaxis(t, axis, 0))",),
    tf_jvp_rules=("tuple(tf.unstack(t, axis=axis))",),
))
# fmt: on
