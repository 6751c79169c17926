"""Ops that pick elements by integer indices (SPEC §3.1): take (tf.gather), take_along_axis,
embedding, sparse_softmax_cross_entropy, and one_hot, whose output is a constant of the
graph (its only input is integer: never differentiated) in the case's dtype.

Their indices are integer inputs (`Op.integer`), never differentiated; each op says what
they may hold (`Op.index_range`), so an index out of range is a case error at its input's
line. A gather's adjoint scatters the cotangent back *adding* where an index repeats:
`SCATTER_ADD` below, an op of its own so that the VJP stays differentiable on the
builtin engine's tensors (its own VJP is the gather again).
"""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import fmt_shape, normalize_axis
from .registry import Op, Shape, ShapeError, get_op, register


def _take_shape(x: Shape, indices: Shape, axis: object = 0) -> Shape:
    if not x:
        raise ShapeError("x is a scalar; take needs at least one axis")
    at = normalize_axis(axis, len(x))
    return (*x[:at], *indices, *x[at + 1 :])


def _take_range(x: Shape, indices: Shape, axis: object = 0) -> tuple[int, int, str]:
    at = normalize_axis(axis, len(x))
    return 0, x[at], f"axis {at} of size {x[at]}"


def _gather_index(indices, axis: int) -> tuple:
    """The index tuple that picks `take(x, indices, axis)` out of x (and scatters back)."""
    return (slice(None),) * axis + (indices,)


def _scatter_add(g, indices, shape, axis, along):
    """Zeros of `shape` with g added at the gathered places: `along` False for take's
    layout (indices replace axis), True for take_along_axis's (indices run along it)."""
    out = np.zeros(shape, g.dtype)
    index = _along_index(indices, axis) if along else _gather_index(indices, axis)
    np.add.at(out, index, g)  # add.at, not assignment: a repeated index accumulates
    return out


def _along_index(indices, axis: int) -> tuple:
    """take_along_axis's indices as a full index tuple: every other axis by position."""
    grid = np.indices(indices.shape, sparse=True)
    return tuple(indices if a == axis else grid[a] for a in range(indices.ndim))


# The gathers' adjoint as an op, so that their VJPs stay differentiable (see above). Not
# registered: the rules call it.
SCATTER_ADD = Op(
    name="scatter_add", params=("g",),
    attrs={"indices": None, "shape": (), "axis": 0, "along": False},
    shape=lambda g, indices, shape, axis, along: tuple(shape), forward=_scatter_add,
    vjps=(lambda w, ans, g, indices, shape, axis, along: _gather_op(along)(w, indices, axis=axis),),
    jvps=(lambda t, ans, g, indices, shape, axis, along: SCATTER_ADD(
        t, indices=indices, shape=shape, axis=axis, along=along),),
    doc="zeros of shape with g added at the gathered places",
)  # fmt: skip


def _gather_op(along: bool) -> Op:
    return get_op("take_along_axis" if along else "take")


def _take_vjp(g, ans, x, indices, axis):
    at = axis % x.ndim
    return SCATTER_ADD(g, indices=indices, shape=x.shape, axis=at, along=False)


def _along_shape(x: Shape, indices: Shape, axis: object = -1) -> Shape:
    at = normalize_axis(axis, len(x))
    if len(indices) != len(x) or any(
        i != d for a, (i, d) in enumerate(zip(indices, x, strict=True)) if a != at
    ):
        raise ShapeError(
            f"indices has shape {fmt_shape(indices)}; it needs x's rank and x's sizes "
            f"{fmt_shape(x)} off axis {at}"
        )
    return tuple(indices)


def _along_vjp(g, ans, x, indices, axis):
    at = axis % x.ndim
    return SCATTER_ADD(g, indices=indices, shape=x.shape, axis=at, along=True)


def _embedding_range(table: Shape, ids: Shape) -> tuple[int, int, str]:
    return 0, table[0], f"the {table[0]} rows of table"


def _embedding_shape(table: Shape, ids: Shape) -> Shape:
    if len(table) < 1:
        raise ShapeError("table is a scalar; it needs one row per id")
    return (*ids, *table[1:])


def _sparse_ce_shape(logits: Shape, labels: Shape) -> Shape:
    if not logits or tuple(labels) != tuple(logits[:-1]):
        raise ShapeError(
            f"labels has shape {fmt_shape(labels)}; it needs logits' shape without its "
            f"last axis (the classes), {fmt_shape(logits[:-1])}"
        )
    return tuple(labels)


def _sparse_ce_range(logits: Shape, labels: Shape) -> tuple[int, int, str]:
    return 0, logits[-1], f"the {logits[-1]} classes of logits"


def _sparse_ce(logits, labels):
    shifted = logits - np.max(logits, axis=-1, keepdims=True)
    log_z = np.log(np.sum(np.exp(shifted), axis=-1))
    return log_z - np.take_along_axis(shifted, labels[..., None], -1)[..., 0]


def _label_mask(logits, labels):
    """one_hot(labels) in logits' dtype: a constant of the graph (labels are integers)."""
    return np.equal(labels[..., None], np.arange(logits.shape[-1])) * np.ones((), logits.dtype)


def _sparse_ce_vjp(g, ans, logits, labels):
    softmax = get_op("softmax")(logits, axis=-1)
    return (softmax - _label_mask(logits, labels)) * np.expand_dims(g, -1)


def _sparse_ce_jvp(t, ans, logits, labels):
    softmax = get_op("softmax")(logits, axis=-1)
    return np.sum((softmax - _label_mask(logits, labels)) * t, axis=-1)


_FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")


def _one_hot_shape(indices: Shape, depth: object = None, dtype: object = None) -> Shape:
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ShapeError(f"depth must be a positive integer (the classes), got {depth!r}")
    if dtype is not None and dtype not in _FLOAT_DTYPES:
        raise ShapeError(f"dtype must be one of {', '.join(_FLOAT_DTYPES)}, got {dtype!r}")
    return (*indices, depth)


def _one_hot(indices, depth, dtype):
    if dtype == "bfloat16":
        import ml_dtypes

        out_dtype = ml_dtypes.bfloat16
    else:
        out_dtype = np.dtype(dtype or "float64")
    return np.equal(np.expand_dims(indices, -1), np.arange(depth)).astype(out_dtype)


_ROWS = "(slice(None),) * axis + (indices,)"  # take's place in x, as an index
_ALONG = "tuple(indices if a == axis else np.indices(indices.shape, sparse=True)[a] for a in range(x.ndim))"  # noqa: E501
_MASK = "(labels[..., None] == np.arange(logits.shape[-1]))"
_TF_MASK = "tf.one_hot(labels, tf.shape(logits)[-1], dtype=logits.dtype)"
_TORCH_MASK = "torch.nn.functional.one_hot(labels, logits.shape[-1])"

# The declarations are a table, laid out by hand: one op per block.
# fmt: off
register(Op(
    name="take", params=("x", "indices"), attrs={"axis": 0}, shape=_take_shape,
    forward=lambda x, indices, axis: np.take(x, indices, axis=axis),
    vjps=(_take_vjp, None),
    tf=lambda tf, x, indices, axis: tf.gather(x, indices, axis=axis), tf_name="tf.gather",
    doc="x's slices at integer indices along axis (a repeated index accumulates)",
    rules=(f"z = np.zeros_like(x); np.add.at(z, {_ROWS}, g); z", ""),
    tf_rules=(
        "tf.experimental.numpy.moveaxis(tf.math.unsorted_segment_sum("
        "tf.experimental.numpy.moveaxis(g, list(range(axis, axis + indices.ndim)), "
        "list(range(indices.ndim))), indices, x.shape[axis]), 0, axis)", ""),
    jvps=(lambda t, ans, x, indices, axis: np.take(t, indices, axis=axis), None),
    jvp_rules=("np.take(t, indices, axis)", ""),
    tf_jvp_rules=("tf.gather(t, indices, axis=axis)", ""),
    # torch's index_add and index_select take one axis of flat indices.
    torch_rules=("torch.zeros_like(x).index_add(axis, indices.reshape(-1), "
                 "g.reshape(*x.shape[:axis], -1, *x.shape[axis + 1:]))", ""),
    torch_jvp_rules=("torch.index_select(t, axis, indices.reshape(-1))"
                     ".reshape(*t.shape[:axis], *indices.shape, *t.shape[axis + 1:])", ""),
    integer=("indices",), index_range=_take_range,
))
register(Op(
    name="take_along_axis", params=("x", "indices"), attrs={"axis": -1}, shape=_along_shape,
    forward=lambda x, indices, axis: np.take_along_axis(x, indices, axis),
    vjps=(_along_vjp, None),
    tf=lambda tf, x, indices, axis: tf.experimental.numpy.take_along_axis(x, indices, axis),
    tf_name="tf.experimental.numpy.take_along_axis",
    doc="x's elements at integer indices along axis, the other axes kept",
    rules=(f"z = np.zeros_like(x); np.add.at(z, {_ALONG}, g); z", ""),
    # one_hot(indices) sums each g into the place it came from: repeats add up.
    tf_rules=("tf.reduce_sum(tf.one_hot(indices, x.shape[axis], axis=axis + 1, dtype=g.dtype)"
              " * tf.expand_dims(g, axis + 1), axis)", ""),
    jvps=(lambda t, ans, x, indices, axis: np.take_along_axis(t, indices, axis), None),
    jvp_rules=("np.take_along_axis(t, indices, axis)", ""),
    tf_jvp_rules=("tf.experimental.numpy.take_along_axis(t, indices, axis)", ""),
    torch_rules=("torch.zeros_like(x).scatter_add(axis, indices, g)", ""),
    torch_jvp_rules=("torch.take_along_dim(t, indices, axis)", ""),
    integer=("indices",), index_range=_take_range,
))
register(Op(
    name="embedding", params=("table", "ids"), shape=_embedding_shape,
    forward=lambda table, ids: np.take(table, ids, axis=0),
    vjps=(lambda g, ans, table, ids: SCATTER_ADD(g, indices=ids, shape=table.shape), None),
    tf=lambda tf, table, ids: tf.nn.embedding_lookup(table, ids),
    tf_name="tf.nn.embedding_lookup",
    doc="table's rows at integer ids: take(table, ids, axis=0)",
    rules=("z = np.zeros_like(table); np.add.at(z, ids, g); z", ""),
    tf_rules=("tf.math.unsorted_segment_sum(g, ids, table.shape[0])", ""),
    jvps=(lambda t, ans, table, ids: np.take(t, ids, axis=0), None),
    jvp_rules=("np.take(t, ids, axis=0)", ""),
    tf_jvp_rules=("tf.gather(t, ids)", ""),
    torch_rules=("torch.zeros_like(table).index_add(0, ids.reshape(-1), "
                 "g.reshape(-1, table.shape[-1]))", ""),
    torch_jvp_rules=("t[ids]", ""),
    integer=("ids",), index_range=_embedding_range,
))
register(Op(
    name="sparse_softmax_cross_entropy", params=("logits", "labels"), shape=_sparse_ce_shape,
    forward=_sparse_ce,
    vjps=(_sparse_ce_vjp, None),
    tf=lambda tf, logits, labels: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits),
    tf_name="tf.nn.sparse_softmax_cross_entropy_with_logits",
    doc="-log softmax(logits)[label] per example; labels integer classes of the last axis",
    rules=(f"(np.exp(logits) / np.sum(np.exp(logits), -1, keepdims=True) - {_MASK}) * g[..., None]",
           ""),
    tf_rules=(f"(tf.nn.softmax(logits) - {_TF_MASK}) * g[..., None]", ""),
    jvps=(_sparse_ce_jvp, None),
    jvp_rules=(f"np.sum((np.exp(logits) / np.sum(np.exp(logits), -1, keepdims=True) - {_MASK})"
               " * t, -1)", ""),
    tf_jvp_rules=(f"tf.reduce_sum((tf.nn.softmax(logits) - {_TF_MASK}) * t, -1)", ""),
    torch_rules=(f"(torch.softmax(logits, -1) - {_TORCH_MASK}) * g[..., None]", ""),
    torch_jvp_rules=(f"torch.sum((torch.softmax(logits, -1) - {_TORCH_MASK}) * t, -1)", ""),
    integer=("labels",), index_range=_sparse_ce_range,
))
register(Op(
    name="one_hot", params=("indices",), attrs={"depth": None, "dtype": None},
    shape=_one_hot_shape, forward=_one_hot,
    vjps=(None,), jvps=(None,), rules=("",), tf_rules=("",), jvp_rules=("",), tf_jvp_rules=("",),
    tf=lambda tf, indices, depth, dtype: tf.one_hot(
        indices, depth, dtype=tf.as_dtype(dtype or "float64")),
    tf_name="tf.one_hot",
    doc="1 where the last axis' position is the index, else 0 (dtype: the case's)",
    integer=("indices",), index_range=lambda indices, depth, dtype: (0, depth, f"depth {depth}"),
    attr_choices={"depth": (2, 3, 5)},
))
# fmt: on
