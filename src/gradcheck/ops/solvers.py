"""Inverses and solvers (SPEC §3.1): inv, det, slogdet, solve(a, b), cholesky and
triangular_solve(a, b, lower=True), batched over leading axes as TensorFlow's.
slogdet has two outputs, (sign, log|det|) (the registry says how such an op is declared):
the sign is piecewise constant, so its cotangent adds nothing to the gradient.

Their VJPs are written with the ops themselves (`INV`, `SOLVE`, `TRIANGULAR_SOLVE`
called like functions) and matmul and swapaxes, which the builtin engine's tensors
record, so that second order works. TensorFlow's shapes: solve's batch axes must be
equal (tf.linalg.solve does not broadcast them), triangular_solve's broadcast; the right
side is a matrix [..., n, k], never a vector. cholesky's input is a symmetric matrix
(`Op.symmetric`): its gradient is the symmetrised one, TensorFlow's; only its lower
triangle is read. The ops that invert a matrix declare it (`Op.conditioned`), so that
``gradcheck fuzz`` draws it well-conditioned; the shipped cases leave singular-adjacent
matrices out on purpose, where two correct engines differ by more than rounding.
"""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import broadcast_shapes, fmt_shape
from .linalg import matrix_t
from .registry import Op, Shape, ShapeError, register


def _square(x: Shape, name: str = "x") -> Shape:
    if len(x) < 2 or x[-1] != x[-2]:
        raise ShapeError(
            f"{name} has shape {fmt_shape(x)}; it needs square matrices in its last two axes"
        )
    return x


def _solve_shape(a: Shape, b: Shape) -> Shape:
    _square(a, "a")
    if len(b) < 2:
        raise ShapeError(
            f"b has shape {fmt_shape(b)}; it needs matrices [..., {a[-1]}, k] (a vector b[:, "
            "None] is one column)"
        )
    if b[-2] != a[-1]:
        raise ShapeError(
            f"b has {b[-2]} rows, a is {a[-2]}x{a[-1]} (shapes {fmt_shape(a)} and {fmt_shape(b)})"
        )
    if a[:-2] != b[:-2]:
        raise ShapeError(
            f"batch axes {fmt_shape(a[:-2])} and {fmt_shape(b[:-2])} differ (tf.linalg.solve "
            "does not broadcast them)"
        )
    return tuple(b)


def _triangular_shape(a: Shape, b: Shape, lower: object = True) -> Shape:
    if not isinstance(lower, bool):
        raise ShapeError(f"lower must be True or False, got {lower!r}")
    _square(a, "a")
    if len(b) < 2 or b[-2] != a[-1]:
        raise ShapeError(
            f"b has shape {fmt_shape(b)}; it needs matrices [..., {a[-1]}, k] to solve "
            f"against a's {a[-2]}x{a[-1]}"
        )
    try:
        batch = broadcast_shapes(a[:-2], b[:-2])
    except ShapeError as e:
        raise ShapeError(f"batch axes: {e}") from None
    return (*batch, *b[-2:])


def _triangle(n: int, lower: bool, dtype) -> np.ndarray:
    """1 where the triangle triangular_solve reads is, 0 elsewhere: a constant mask."""
    ones = np.ones((n, n), dtype)
    return np.tril(ones) if lower else np.triu(ones)


def _triangular_solve(a, b, lower):
    a = a * _triangle(a.shape[-1], lower, a.dtype)  # the other triangle is never read
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.linalg.solve(
        np.broadcast_to(a, (*batch, *a.shape[-2:])), np.broadcast_to(b, (*batch, *b.shape[-2:]))
    )


def _tri_vjp_a(g, ans, a, b, lower):
    grad_b = TRIANGULAR_SOLVE(matrix_t(a), g, lower=not lower)
    return -(grad_b @ matrix_t(ans)) * _triangle(a.shape[-1], lower, g.dtype)


def _det_inv_t(x):
    return matrix_t(INV(x))


def _cholesky_vjp(g, ans, x):
    # TensorFlow's (Murray 2016): L^-T phi(L^T g) L^-1, symmetrised; phi keeps the lower
    # triangle and halves the diagonal.
    n = x.shape[-1]
    l_inv = TRIANGULAR_SOLVE(ans, np.eye(n, dtype=g.dtype), lower=True)
    middle = (matrix_t(ans) @ g) * _phi(n, g.dtype)
    grad = matrix_t(l_inv) @ middle @ l_inv
    return (grad + matrix_t(grad)) * 0.5


def _cholesky_jvp(t, ans, x):
    n = x.shape[-1]
    l_inv = TRIANGULAR_SOLVE(ans, np.eye(n, dtype=t.dtype), lower=True)
    sym = (t + matrix_t(t)) * 0.5
    return ans @ ((l_inv @ sym @ matrix_t(l_inv)) * _phi(n, t.dtype))


def _phi(n: int, dtype) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype)) - 0.5 * np.eye(n, dtype=dtype)


_T = "np.swapaxes({}, -1, -2)"
_MASK = "(np.tril(np.ones(a.shape[-2:])) if lower else np.triu(np.ones(a.shape[-2:])))"
_TF_MASK = (
    "tf.linalg.band_part(tf.ones_like(a), -1, 0) if lower else "
    "tf.linalg.band_part(tf.ones_like(a), 0, -1)"
)
_PHI = "(np.tril(np.ones(x.shape[-2:])) - 0.5 * np.eye(x.shape[-1]))"
_TF_PHI = "(tf.linalg.band_part(tf.ones_like(x), -1, 0) - 0.5 * tf.eye(x.shape[-1], dtype=x.dtype))"
_LINV = "l_inv = np.linalg.inv(y)"
_TF_LINV = "l_inv = tf.linalg.triangular_solve(y, tf.eye(x.shape[-1], dtype=x.dtype))"

# The declarations are a table, laid out by hand: one op per block.
# fmt: off
INV = register(Op(
    name="inv", params=("x",), shape=_square,
    forward=lambda x: np.linalg.inv(x),
    vjps=(lambda g, ans, x: -(matrix_t(ans) @ g @ matrix_t(ans)),),
    tf=lambda tf, x: tf.linalg.inv(x), tf_name="tf.linalg.inv",
    doc="the inverse of each square matrix in the last two axes",
    rules=(f"-({_T.format('y')} @ g @ {_T.format('y')})",),
    tf_rules=("-tf.matmul(y, tf.matmul(g, y, transpose_b=True), transpose_a=True)",),
    jvps=(lambda t, ans, x: -(ans @ t @ ans),),
    jvp_rules=("-(y @ t @ y)",), tf_jvp_rules=("-(y @ t @ y)",),
    conditioned=("x",),
))
register(Op(
    name="det", params=("x",), shape=lambda x: _square(x)[:-2],
    forward=lambda x: np.asarray(np.linalg.det(x)),
    vjps=(lambda g, ans, x: np.expand_dims(np.expand_dims(g * ans, -1), -1) * _det_inv_t(x),),
    tf=lambda tf, x: tf.linalg.det(x), tf_name="tf.linalg.det",
    doc="the determinant of each square matrix in the last two axes",
    rules=(f"(g * y)[..., None, None] * {_T.format('np.linalg.inv(x)')}",),
    tf_rules=("(g * y)[..., None, None] * tf.linalg.inv(x, adjoint=True)",),
    jvps=(lambda t, ans, x: ans * np.sum(_det_inv_t(x) * t, axis=(-2, -1)),),
    jvp_rules=("y * np.trace(np.linalg.inv(x) @ t, axis1=-2, axis2=-1)",),
    tf_jvp_rules=("y * tf.linalg.trace(tf.linalg.solve(x, t))",),
    # torch.trace takes one matrix, no batch.
    torch_jvp_rules=("y * torch.diagonal(torch.linalg.solve(x, t), dim1=-2, dim2=-1).sum(-1)",),
    conditioned=("x",),
))
register(Op(
    name="slogdet", params=("x",), shape=lambda x: (_square(x)[:-2],) * 2,
    outputs=lambda x: 2, forward=lambda x: tuple(np.linalg.slogdet(x)),
    vjps=(lambda gs, ans, x: np.expand_dims(np.expand_dims(gs[1], -1), -1) * _det_inv_t(x),),
    tf=lambda tf, x: tuple(tf.linalg.slogdet(x)), tf_name="tf.linalg.slogdet",
    doc="(sign, log|det|) of each square matrix in the last two axes; two outputs, "
        "indexed: slogdet(x)[1]; the sign's gradient is zero",
    rules=(f"g[1][..., None, None] * {_T.format('np.linalg.inv(x)')}",),
    tf_rules=("g[1][..., None, None] * tf.linalg.inv(x, adjoint=True)",),
    jvps=(lambda t, ans, x: (np.zeros_like(ans[0]), np.sum(_det_inv_t(x) * t, axis=(-2, -1))),),
    jvp_rules=("(np.zeros_like(y[0]), np.trace(np.linalg.inv(x) @ t, axis1=-2, axis2=-1))",),
    tf_jvp_rules=("(tf.zeros_like(y[0]), tf.linalg.trace(tf.linalg.solve(x, t)))",),
    torch_jvp_rules=("(torch.zeros_like(y[0]), "
                     "torch.diagonal(torch.linalg.solve(x, t), dim1=-2, dim2=-1).sum(-1))",),
    conditioned=("x",),
))
SOLVE = register(Op(
    name="solve", params=("a", "b"), shape=_solve_shape,
    forward=lambda a, b: np.linalg.solve(a, b),
    vjps=(lambda g, ans, a, b: -(SOLVE(matrix_t(a), g) @ matrix_t(ans)),
          lambda g, ans, a, b: SOLVE(matrix_t(a), g)),
    tf=lambda tf, a, b: tf.linalg.solve(a, b), tf_name="tf.linalg.solve",
    doc="x with a @ x = b, a square, b matrices [..., n, k]; batch axes equal",
    rules=(f"-(np.linalg.solve({_T.format('a')}, g) @ {_T.format('y')})",
           f"np.linalg.solve({_T.format('a')}, g)"),
    tf_rules=("-tf.matmul(tf.linalg.solve(a, g, adjoint=True), y, transpose_b=True)",
              "tf.linalg.solve(a, g, adjoint=True)"),
    jvps=(lambda t, ans, a, b: -SOLVE(a, t @ ans), lambda t, ans, a, b: SOLVE(a, t)),
    jvp_rules=("-np.linalg.solve(a, t @ y)", "np.linalg.solve(a, t)"),
    tf_jvp_rules=("-tf.linalg.solve(a, t @ y)", "tf.linalg.solve(a, t)"),
    conditioned=("a",),
))
register(Op(
    name="cholesky", params=("x",), shape=_square,
    forward=lambda x: np.linalg.cholesky(x),
    vjps=(_cholesky_vjp,),
    tf=lambda tf, x: tf.linalg.cholesky(x), tf_name="tf.linalg.cholesky",
    doc="the lower Cholesky factor of each symmetric positive-definite matrix (its lower "
        "triangle read); the gradient is the symmetrised one",
    rules=(f"{_LINV}; m = l_inv.swapaxes(-1, -2) @ ((y.swapaxes(-1, -2) @ g) * {_PHI}) @ l_inv; "
           "(m + m.swapaxes(-1, -2)) / 2",),
    tf_rules=(f"{_TF_LINV}; m = tf.matmul(l_inv, tf.matmul(y, g, transpose_a=True) * {_TF_PHI}"
              ", transpose_a=True) @ l_inv; (m + tf.linalg.matrix_transpose(m)) / 2",),
    jvps=(_cholesky_jvp,),
    jvp_rules=(f"{_LINV}; y @ ((l_inv @ ((t + t.swapaxes(-1, -2)) / 2) @ "
               f"l_inv.swapaxes(-1, -2)) * {_PHI})",),
    tf_jvp_rules=(f"{_TF_LINV}; y @ (tf.matmul(l_inv @ ((t + tf.linalg.matrix_transpose(t)) / 2)"
                  f", l_inv, transpose_b=True) * {_TF_PHI})",),
    symmetric=("x",),
))
TRIANGULAR_SOLVE = register(Op(
    name="triangular_solve", params=("a", "b"), attrs={"lower": True}, shape=_triangular_shape,
    forward=_triangular_solve,
    vjps=(_tri_vjp_a,
          lambda g, ans, a, b, lower: TRIANGULAR_SOLVE(matrix_t(a), g, lower=not lower)),
    tf=lambda tf, a, b, lower: tf.linalg.triangular_solve(a, b, lower=lower),
    tf_name="tf.linalg.triangular_solve",
    doc="x with a @ x = b, a's lower (lower=False: upper) triangle read; batch axes broadcast",
    rules=(f"-(np.linalg.solve({_T.format(f'(a * {_MASK})')}, g) @ {_T.format('y')}) * {_MASK}",
           f"np.linalg.solve({_T.format(f'(a * {_MASK})')}, g)"),
    tf_rules=(f"-tf.matmul(tf.linalg.triangular_solve(a, g, lower=lower, adjoint=True), y, "
              f"transpose_b=True) * ({_TF_MASK})",
              "tf.linalg.triangular_solve(a, g, lower=lower, adjoint=True)"),
    jvps=(lambda t, ans, a, b, lower: -TRIANGULAR_SOLVE(
              a, (t * _triangle(a.shape[-1], lower, t.dtype)) @ ans, lower=lower),
          lambda t, ans, a, b, lower: TRIANGULAR_SOLVE(a, t, lower=lower)),
    jvp_rules=(f"-np.linalg.solve(a * {_MASK}, (t * {_MASK}) @ y)",
               f"np.linalg.solve(a * {_MASK}, t)"),
    tf_jvp_rules=(f"-tf.linalg.triangular_solve(a, (t * ({_TF_MASK})) @ y, lower=lower)",
                  "tf.linalg.triangular_solve(a, t, lower=lower)"),
    attr_choices={"lower": (True, False)},
    conditioned=("a",),
))
# fmt: on
