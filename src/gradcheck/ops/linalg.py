"""Linear algebra: matrix multiplication with broadcast batch axes; dot, outer, trace and
diag_part (SPEC §3.1; trace and diag_part act on the last two axes, batched)."""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import broadcast_shapes, fmt_shape
from .registry import Op, Shape, ShapeError, register


def _matmul_shape(a: Shape, b: Shape) -> Shape:
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(
            f"needs rank >= 2 on both sides, got shapes {fmt_shape(a)} and {fmt_shape(b)}"
        )
    if a[-1] != b[-2]:
        raise ShapeError(
            f"inner dimensions {a[-1]} and {b[-2]} differ "
            f"(shapes {fmt_shape(a)} and {fmt_shape(b)})"
        )
    try:
        batch = broadcast_shapes(a[:-2], b[:-2])
    except ShapeError as e:
        raise ShapeError(f"batch axes: {e}") from None
    return (*batch, a[-2], b[-1])


def matrix_t(x: np.ndarray) -> np.ndarray:
    """Swap the last two axes only: the transpose a batched matmul's VJP needs."""
    return np.swapaxes(x, -1, -2)


register(
    Op(
        name="matmul",
        params=("a", "b"),
        shape=_matmul_shape,
        forward=lambda a, b: np.matmul(a, b),
        vjps=(
            lambda g, ans, a, b: g @ matrix_t(b),
            lambda g, ans, a, b: matrix_t(a) @ g,
        ),
        tf=lambda tf, a, b: tf.linalg.matmul(a, b),
        tf_name="tf.linalg.matmul",
        doc="a @ b over the last two axes; the batch axes broadcast",
        operator="@",
        rules=("g @ np.swapaxes(b, -1, -2)", "np.swapaxes(a, -1, -2) @ g"),
        tf_rules=("tf.matmul(g, b, transpose_b=True)", "tf.matmul(a, g, transpose_a=True)"),
        jvps=(lambda t, ans, a, b: t @ b, lambda t, ans, a, b: a @ t),
        jvp_rules=("t @ b", "a @ t"),
        tf_jvp_rules=("tf.matmul(t, b)", "tf.matmul(a, t)"),
    )
)
# appended to src/gradcheck/ops/linalg.py


def _dot_shape(a: Shape, b: Shape) -> Shape:
    if len(a) != 1 or len(b) != 1:
        raise ShapeError(
            f"dot is the inner product of two 1-D arrays, got shapes {fmt_shape(a)} and "
            f"{fmt_shape(b)} (use matmul or tensordot)"
        )
    if a != b:
        raise ShapeError(f"lengths {a[0]} and {b[0]} differ")
    return ()


def _outer_shape(a: Shape, b: Shape) -> Shape:
    if len(a) != 1 or len(b) != 1:
        raise ShapeError(
            f"outer takes two 1-D arrays, got shapes {fmt_shape(a)} and {fmt_shape(b)}"
        )
    return (a[0], b[0])


def _matrices(x: Shape) -> Shape:
    if len(x) < 2:
        raise ShapeError(
            f"needs rank >= 2 (it acts on the last two axes), got shape {fmt_shape(x)}"
        )
    return x


def _eye(x):
    """The identity of x's last two axes (rectangular): where the diagonal is."""
    return np.eye(x.shape[-2], x.shape[-1], dtype=x.dtype)


def _diag_vjp(g, ans, x):
    # g has one entry per diagonal element, min(m, n) of them: along the shorter axis.
    if x.shape[-2] <= x.shape[-1]:
        return np.expand_dims(g, -1) * _eye(x)
    return np.expand_dims(g, -2) * _eye(x)


def _diag_of(t):
    k = min(t.shape[-2:])
    return np.sum(t[..., :k, :k] * np.eye(k, dtype=t.dtype), axis=-1)


_EYE = "np.eye(x.shape[-2], x.shape[-1])"
_TF_EYE = "tf.eye(x.shape[-2], x.shape[-1], dtype=g.dtype)"

# The declarations are a table, laid out by hand: one op per block.
# fmt: off
register(Op(
    name="dot", params=("a", "b"), shape=_dot_shape,
    forward=lambda a, b: np.asarray(np.dot(a, b)),
    vjps=(lambda g, ans, a, b: g * b, lambda g, ans, a, b: g * a),
    tf=lambda tf, a, b: tf.tensordot(a, b, 1), tf_name="tf.tensordot(a, b, 1)",
    doc="the inner product of two 1-D arrays",
    rules=("g * b", "g * a"), tf_rules=("g * b", "g * a"),
    jvps=(lambda t, ans, a, b: np.sum(t * b), lambda t, ans, a, b: np.sum(a * t)),
    jvp_rules=("np.sum(t * b)", "np.sum(a * t)"),
    tf_jvp_rules=("tf.reduce_sum(t * b)", "tf.reduce_sum(a * t)"),
))
register(Op(
    name="outer", params=("a", "b"), shape=_outer_shape,
    forward=lambda a, b: np.outer(a, b),
    vjps=(lambda g, ans, a, b: np.sum(g * b, axis=1),
          lambda g, ans, a, b: np.sum(g * np.expand_dims(a, 1), axis=0)),
    tf=lambda tf, a, b: tf.tensordot(a, b, 0), tf_name="tf.tensordot(a, b, 0)",
    doc="a[i] * b[j] for two 1-D arrays",
    rules=("np.sum(g * b, axis=1)", "np.sum(g * a[:, None], axis=0)"),
    tf_rules=("tf.reduce_sum(g * b, axis=1)", "tf.reduce_sum(g * a[:, None], axis=0)"),
    jvps=(lambda t, ans, a, b: np.expand_dims(t, 1) * b,
          lambda t, ans, a, b: np.expand_dims(a, 1) * t),
    jvp_rules=("t[:, None] * b", "a[:, None] * t"),
    tf_jvp_rules=("t[:, None] * b", "a[:, None] * t"),
))
register(Op(
    name="trace", params=("x",), shape=lambda x: _matrices(x)[:-2],
    forward=lambda x: np.asarray(np.trace(x, axis1=-2, axis2=-1)),
    vjps=(lambda g, ans, x: np.expand_dims(np.expand_dims(g, -1), -1) * _eye(x),),
    tf=lambda tf, x: tf.linalg.trace(x), tf_name="tf.linalg.trace",
    doc="the sum of the diagonal of the last two axes, batched",
    rules=(f"g[..., None, None] * {_EYE}",), tf_rules=(f"g[..., None, None] * {_TF_EYE}",),
    jvps=(lambda t, ans, x: np.sum(t * _eye(x), axis=(-2, -1)),),
    jvp_rules=(f"np.sum(t * {_EYE}, axis=(-2, -1))",),
    tf_jvp_rules=("tf.linalg.trace(t)",),
))
register(Op(
    name="diag_part", params=("x",),
    shape=lambda x: (*_matrices(x)[:-2], min(x[-2:])),
    forward=lambda x: np.diagonal(x, axis1=-2, axis2=-1).copy(),
    vjps=(_diag_vjp,),
    tf=lambda tf, x: tf.linalg.diag_part(x), tf_name="tf.linalg.diag_part",
    doc="the diagonal of the last two axes (min(m, n) long), batched",
    rules=(f"(g[..., :, None] if x.shape[-2] <= x.shape[-1] else g[..., None, :]) * {_EYE}",),
    tf_rules=(f"(g[..., :, None] if x.shape[-2] <= x.shape[-1] else g[..., None, :]) "
              f"* {_TF_EYE}",),
    jvps=(lambda t, ans, x: _diag_of(t),),
    jvp_rules=("np.diagonal(t, axis1=-2, axis2=-1)",),
    tf_jvp_rules=("tf.linalg.diag_part(t)",),
))
# fmt: on
