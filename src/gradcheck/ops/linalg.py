"""Matrix multiplication with broadcast batch axes."""

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
