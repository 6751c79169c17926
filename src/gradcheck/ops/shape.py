"""Ops that move elements around without changing them."""

from __future__ import annotations

import math

from ..util.lazy_numpy import np
from .broadcast import broadcast_shapes, fmt_shape, normalize_axes, normalize_axis
from .registry import Op, Shape, ShapeError, register


def _flip_shape(x: Shape, axis: object = None) -> Shape:
    if axis is None:  # SPEC: flip(x, axis); NumPy's flip-everything would hide a missing axis
        raise ShapeError("axis must be an integer or a list of integers, got None")
    normalize_axes(axis, len(x))
    return x


def _swapaxes_shape(x: Shape, axis1: object = None, axis2: object = None) -> Shape:
    a, b = normalize_axis(axis1, len(x), what="axis1"), normalize_axis(axis2, len(x), what="axis2")
    out = list(x)
    out[a], out[b] = x[b], x[a]
    return tuple(out)


def _int_list(value: object, what: str) -> list[int]:
    items = value if isinstance(value, (list, tuple)) else None
    if items is None or any(isinstance(v, bool) or not isinstance(v, int) for v in items):
        raise ShapeError(f"{what} must be a list of integers, got {value!r}")
    return list(items)


def _reshape_shape(x: Shape, shape: object = None) -> Shape:
    target = _int_list(shape, "shape")
    if target.count(-1) > 1 or any(d < -1 for d in target):
        raise ShapeError(f"shape {target} may hold one -1 and otherwise sizes >= 0")
    size, known = math.prod(x), math.prod(d for d in target if d != -1)
    if -1 in target:
        if known == 0 or size % known:
            raise ShapeError(f"cannot reshape {fmt_shape(x)} into {target}")
        target[target.index(-1)] = size // known
    if math.prod(target) != size:
        raise ShapeError(f"cannot reshape {fmt_shape(x)} ({size} elements) into {target}")
    return tuple(target)


def _perm(perm: object, ndim: int) -> list[int]:
    if perm is None:
        return list(reversed(range(ndim)))
    order = _int_list(perm, "perm")
    if sorted(order) != list(range(ndim)):
        raise ShapeError(f"perm {order} is not a permutation of the {ndim} axes")
    return order


def _transpose_shape(x: Shape, perm: object = None) -> Shape:
    return tuple(x[i] for i in _perm(perm, len(x)))


def _matrix_transpose_shape(x: Shape) -> Shape:
    if len(x) < 2:
        raise ShapeError(f"needs rank >= 2, got shape {fmt_shape(x)}")
    return (*x[:-2], x[-1], x[-2])


def _expand_dims_shape(x: Shape, axis: object = 0) -> Shape:
    at = normalize_axis(axis, len(x) + 1)
    return (*x[:at], 1, *x[at:])


def _squeeze_axes(x: Shape, axis: object) -> tuple[int, ...]:
    if axis is None or axis == [] or axis == ():  # TensorFlow: an empty list squeezes all
        return tuple(i for i, d in enumerate(x) if d == 1)
    axes = normalize_axes(axis, len(x))
    for i in axes:
        if x[i] != 1:
            raise ShapeError(f"cannot squeeze axis {i} of size {x[i]}")
    return axes


def _squeeze_shape(x: Shape, axis: object = None) -> Shape:
    axes = _squeeze_axes(x, axis)
    return tuple(d for i, d in enumerate(x) if i not in axes)


def _broadcast_to_shape(x: Shape, shape: object = None) -> Shape:
    target = tuple(_int_list(shape, "shape"))
    if broadcast_shapes(x, target) != target:
        raise ShapeError(f"cannot broadcast {fmt_shape(x)} to {fmt_shape(target)}")
    return target


def _concat_shape(shapes: list[Shape], axis: object = 0) -> Shape:
    first = shapes[0]
    at = normalize_axis(axis, len(first))
    for s in shapes[1:]:
        off_axis = [(a, b) for i, (a, b) in enumerate(zip(s, first, strict=False)) if i != at]
        if len(s) != len(first) or any(a != b for a, b in off_axis):
            listed = ", ".join(fmt_shape(s) for s in shapes)
            raise ShapeError(f"shapes {listed} differ off axis {at}")
    return (*first[:at], sum(s[at] for s in shapes), *first[at + 1 :])


def _stack_shape(shapes: list[Shape], axis: object = 0) -> Shape:
    first = shapes[0]
    if any(s != first for s in shapes):
        raise ShapeError("shapes " + ", ".join(fmt_shape(s) for s in shapes) + " differ")
    at = normalize_axis(axis, len(first) + 1)
    return (*first[:at], len(shapes), *first[at:])


def _concat_vjp(g, ans, xs, i, axis):
    start = sum(x.shape[axis] for x in xs[:i])
    return np.take(g, range(start, start + xs[i].shape[axis]), axis=axis)


def _getitem_shape(x: Shape, index: object = ()) -> Shape:
    items = index if isinstance(index, tuple) else (index,)
    try:
        return _indexed_shape(x, items)
    except (IndexError, TypeError, ValueError) as e:
        raise ShapeError(
            f"index {format_index(items)} does not apply to shape {fmt_shape(x)}: {e}"
        ) from None


def _indexed_shape(x: Shape, items: tuple) -> Shape:
    """The shape NumPy's basic indexing gives (integers, slices, None and one `...`),
    worked out here: checking a case's shapes imports no NumPy."""
    if sum(i is Ellipsis for i in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    indexed = sum(i is not None and i is not Ellipsis for i in items)
    if indexed > len(x):
        raise IndexError(f"too many indices: the array has {len(x)} axes, {indexed} were indexed")
    at = items.index(Ellipsis) if Ellipsis in items else len(items)
    axes = iter(enumerate(x))
    out = []
    for item in (*items[:at], *(slice(None),) * (len(x) - indexed), *items[at + 1 :]):
        if item is None:
            out.append(1)
            continue
        axis, size = next(axes)
        if isinstance(item, slice):
            out.append(len(range(*item.indices(size))))  # ValueError for a step of 0
        elif isinstance(item, bool) or not isinstance(item, int):
            raise IndexError("only integers, slices, None and ... are valid indices")
        elif not -size <= item < size:
            raise IndexError(f"index {item} is out of bounds for axis {axis} with size {size}")
    return tuple(out)


def _scatter(g, shape, index):
    # Basic indexing never repeats an element, so assignment is the adjoint.
    out = np.zeros(shape, g.dtype)
    out[index] = g
    return out


# getitem's adjoint, zeros of `shape` with g at `index`, as an op: so that getitem's VJP
# is differentiable on the builtin engine's tensors (create_graph). Not registered.
SCATTER = Op(
    name="scatter", params=("g",), attrs={"shape": (), "index": ()},
    shape=lambda g, shape, index: tuple(shape), forward=_scatter,
    vjps=(lambda w, ans, g, shape, index: w[index],),
    jvps=(lambda t, ans, g, shape, index: SCATTER(t, shape=shape, index=index),),
    doc="zeros of shape, with g at index",
)  # fmt: skip


def _getitem_vjp(g, ans, x, index):
    return SCATTER(g, shape=x.shape, index=index)


def _concat_jvp(t, ans, xs, i, axis):
    return np.concatenate([t if j == i else np.zeros_like(x) for j, x in enumerate(xs)], axis)


def _stack_jvp(t, ans, xs, i, axis):
    return np.stack([t if j == i else np.zeros_like(x) for j, x in enumerate(xs)], axis)


# concat's and stack's JVP texts: the tangent in its place, zeros for the other values.
_PLACED = "[t if j == i else {0}.zeros_like(v) for j, v in enumerate(values)]"
# torch.flip takes a tuple of dims only; flip's axis is an int, a list or None.
_TORCH_DIMS = (
    "tuple(range({0}.ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis"
)


def format_index(index: tuple) -> str:
    def one(i: object) -> str:
        if i is None:
            return "None"
        if i is Ellipsis:
            return "..."
        if isinstance(i, slice):
            text = ("" if i.start is None else str(i.start)) + ":"
            text += "" if i.stop is None else str(i.stop)
            return text + ("" if i.step is None else f":{i.step}")
        return str(i)

    return "[" + ", ".join(one(i) for i in index) + "]"


# The declarations are a table, laid out by hand: one op per block.
# fmt: off
register(Op(
    name="reshape", params=("x",), attrs={"shape": None}, shape=_reshape_shape,
    forward=lambda x, shape: np.reshape(x, shape),
    vjps=(lambda g, ans, x, shape: np.reshape(g, x.shape),),
    tf=lambda tf, x, shape: tf.reshape(x, shape), tf_name="tf.reshape",
    doc="same elements, new shape (one -1 is inferred)",
    rules=("g.reshape(x.shape)",), tf_rules=("tf.reshape(g, tf.shape(x))",),
    jvps=(lambda t, ans, x, shape: np.reshape(t, ans.shape),),
    jvp_rules=("t.reshape(y.shape)",), tf_jvp_rules=("tf.reshape(t, tf.shape(y))",),
))
register(Op(
    name="transpose", params=("x",), attrs={"perm": None}, shape=_transpose_shape,
    forward=lambda x, perm: np.transpose(x, perm),
    vjps=(lambda g, ans, x, perm: np.transpose(g, np.argsort(_perm(perm, x.ndim))),),
    tf=lambda tf, x, perm: tf.transpose(x, perm), tf_name="tf.transpose",
    doc="permute axes; perm=None reverses all of them, like NumPy and TensorFlow",
    rules=("np.transpose(g, np.argsort(perm))",),
    tf_rules=("tf.transpose(g, tf.math.invert_permutation(perm))",),
    jvps=(lambda t, ans, x, perm: np.transpose(t, perm),),
    jvp_rules=("np.transpose(t, perm)",), tf_jvp_rules=("tf.transpose(t, perm)",),
    # The inverse permutation in Python: torch.argsort and jnp.argsort take no list.
    torch_rules=("torch.permute(g, [perm.index(k) for k in range(len(perm))])",),
    jax_rules=("jnp.transpose(g, [perm.index(k) for k in range(len(perm))])",),
))
register(Op(
    name="matrix_transpose", params=("x",), shape=_matrix_transpose_shape,
    forward=lambda x: np.swapaxes(x, -1, -2),
    vjps=(lambda g, ans, x: np.swapaxes(g, -1, -2),),
    tf=lambda tf, x: tf.linalg.matrix_transpose(x), tf_name="tf.linalg.matrix_transpose",
    doc="swap the last two axes only",
    rules=("np.swapaxes(g, -1, -2)",), tf_rules=("tf.linalg.matrix_transpose(g)",),
    jvps=(lambda t, ans, x: np.swapaxes(t, -1, -2),),
    jvp_rules=("np.swapaxes(t, -1, -2)",), tf_jvp_rules=("tf.linalg.matrix_transpose(t)",),
))
register(Op(
    name="expand_dims", params=("x",), attrs={"axis": 0}, shape=_expand_dims_shape,
    forward=lambda x, axis: np.expand_dims(x, axis),
    vjps=(lambda g, ans, x, axis: np.reshape(g, x.shape),),
    tf=lambda tf, x, axis: tf.expand_dims(x, axis), tf_name="tf.expand_dims",
    doc="insert a size-1 axis at axis",
    rules=("g.reshape(x.shape)",), tf_rules=("tf.reshape(g, tf.shape(x))",),
    jvps=(lambda t, ans, x, axis: np.reshape(t, ans.shape),),
    jvp_rules=("t.reshape(y.shape)",), tf_jvp_rules=("tf.reshape(t, tf.shape(y))",),
))
register(Op(
    name="squeeze", params=("x",), attrs={"axis": None}, shape=_squeeze_shape,
    forward=lambda x, axis: np.squeeze(x, _squeeze_axes(x.shape, axis)),
    vjps=(lambda g, ans, x, axis: np.reshape(g, x.shape),),
    tf=lambda tf, x, axis: tf.squeeze(x, axis), tf_name="tf.squeeze",
    doc="remove size-1 axes (all of them when axis=None)",
    rules=("g.reshape(x.shape)",), tf_rules=("tf.reshape(g, tf.shape(x))",),
    jvps=(lambda t, ans, x, axis: np.reshape(t, ans.shape),),
    jvp_rules=("t.reshape(y.shape)",), tf_jvp_rules=("tf.reshape(t, tf.shape(y))",),
))
register(Op(
    name="broadcast_to", params=("x",), attrs={"shape": None}, shape=_broadcast_to_shape,
    forward=lambda x, shape: np.broadcast_to(x, shape),
    # The gradient in the broadcast shape, as the binary ops give it: the engine's one
    # `unbroadcast` sums it back (and the catalogue's broadcast.* faults replace that step).
    vjps=(lambda g, ans, x, shape: g,),
    tf=lambda tf, x, shape: tf.broadcast_to(x, shape), tf_name="tf.broadcast_to",
    doc="broadcast x to shape",
    rules=("np.sum(g, summed_axes).reshape(x.shape)",),
    tf_rules=("tf.reshape(tf.reduce_sum(g, summed_axes), tf.shape(x))",),
    # The tangent in x's shape, as the binary ops give theirs: the engine's one broadcast
    # step widens it (and the catalogue's jvp.no-broadcast replaces that step).
    jvps=(lambda t, ans, x, shape: t,),
    jvp_rules=("np.broadcast_to(t, shape)",), tf_jvp_rules=("tf.broadcast_to(t, shape)",),
))
register(Op(
    name="concat", params=("values",), attrs={"axis": 0}, shape=_concat_shape, variadic=True,
    forward=lambda xs, axis: np.concatenate(xs, axis=axis),
    vjps=(lambda g, ans, xs, i, axis: _concat_vjp(g, ans, xs, i, axis % g.ndim),),
    tf=lambda tf, xs, axis: tf.concat(xs, axis), tf_name="tf.concat",
    doc="join along an existing axis",
    rules=("np.split(g, offsets, axis)[i]",), tf_rules=("tf.split(g, sizes, axis)[i]",),
    torch_rules=("torch.split(g, sizes, axis)[i]",),
    jvps=(_concat_jvp,),
    jvp_rules=(f"np.concatenate({_PLACED.format('np')}, axis)",),
    tf_jvp_rules=(f"tf.concat({_PLACED.format('tf')}, axis)",),
))
register(Op(
    name="stack", params=("values",), attrs={"axis": 0}, shape=_stack_shape, variadic=True,
    forward=lambda xs, axis: np.stack(xs, axis=axis),
    vjps=(lambda g, ans, xs, i, axis: np.take(g, i, axis=axis),),
    tf=lambda tf, xs, axis: tf.stack(xs, axis), tf_name="tf.stack",
    doc="join along a new axis",
    rules=("np.take(g, i, axis)",), tf_rules=("tf.unstack(g, axis=axis)[i]",),
    torch_rules=("torch.select(g, axis, i)",),
    jvps=(_stack_jvp,),
    jvp_rules=(f"np.stack({_PLACED.format('np')}, axis)",),
    tf_jvp_rules=(f"tf.stack({_PLACED.format('tf')}, axis)",),
))
register(Op(
    name="getitem", params=("x",), attrs={"index": ()}, shape=_getitem_shape,
    forward=lambda x, index: x[index],
    vjps=(_getitem_vjp,),
    tf=lambda tf, x, index: x[index], tf_name="tf.Tensor.__getitem__",
    doc="basic indexing x[...]: ints, slices, None and ...",
    rules=("z = np.zeros_like(x); z[index] = g; z",),
    tf_rules=("tf.Variable(tf.zeros_like(x))[index].assign(g)",),
    jvps=(lambda t, ans, x, index: t[index],),
    jvp_rules=("t[index]",), tf_jvp_rules=("t[index]",),
))
FLIP = register(Op(
    name="flip", params=("x",), attrs={"axis": None}, shape=_flip_shape,
    forward=lambda x, axis: np.flip(x, normalize_axes(axis, np.ndim(x))),
    vjps=(lambda g, ans, x, axis: FLIP(g, axis=axis),),
    tf=lambda tf, x, axis: tf.reverse(x, list(normalize_axes(axis, x.shape.rank))),
    tf_name="tf.reverse", doc="x with its elements along axis (an int or a list) in reverse",
    rules=("np.flip(g, axis)",), tf_rules=("tf.reverse(g, tf.reshape(axis, [-1]))",),
    jvps=(lambda t, ans, x, axis: FLIP(t, axis=axis),),
    jvp_rules=("np.flip(t, axis)",), tf_jvp_rules=("tf.reverse(t, tf.reshape(axis, [-1]))",),
    torch_rules=(f"torch.flip(g, dims={_TORCH_DIMS.format('g')})",),
    torch_jvp_rules=(f"torch.flip(t, dims={_TORCH_DIMS.format('t')})",),
))
register(Op(
    name="swapaxes", params=("x",), attrs={"axis1": None, "axis2": None}, shape=_swapaxes_shape,
    forward=lambda x, axis1, axis2: np.swapaxes(x, axis1, axis2),
    vjps=(lambda g, ans, x, axis1, axis2: np.swapaxes(g, axis1, axis2),),
    tf=lambda tf, x, axis1, axis2: tf.experimental.numpy.swapaxes(x, axis1, axis2),
    tf_name="tf.experimental.numpy.swapaxes", doc="x with axis1 and axis2 swapped",
    rules=("np.swapaxes(g, axis1, axis2)",),
    tf_rules=("tf.experimental.numpy.swapaxes(g, axis1, axis2)",),
    jvps=(lambda t, ans, x, axis1, axis2: np.swapaxes(t, axis1, axis2),),
    jvp_rules=("np.swapaxes(t, axis1, axis2)",),
    tf_jvp_rules=("tf.experimental.numpy.swapaxes(t, axis1, axis2)",),
    attr_choices={"axis1": (0, -1), "axis2": (0, 1, -1)},
))
# fmt: on
