"""Faults of the inverses, solvers and einsum: transposes left out, products taken
elementwise, the symmetrisation missing, a repeated index's identity left out."""

from __future__ import annotations

import numpy as np

from ....ops.contractions import EINSUM, einsum_adjoint
from ....ops.linalg import matrix_t
from ....ops.solvers import SOLVE, TRIANGULAR_SOLVE, _cholesky_vjp, _phi, _triangle
from ..rules import Fault


def cholesky_triangular(g, ans, x):
    """The gradient of a cholesky that reads only the lower triangle, as finite differences
    of it give: the symmetric gradient folded onto that triangle (off-diagonal doubled)."""
    return _cholesky_vjp(g, ans, x) * (2 * _phi(x.shape[-1], g.dtype))


def _tri_b_full_transpose(g, ans, a, b, lower):
    return TRIANGULAR_SOLVE(np.transpose(a), g, lower=not lower)


def _tri_a_full_transpose(g, ans, a, b, lower):
    grad_b = _tri_b_full_transpose(g, ans, a, b, lower)
    return -(grad_b @ np.transpose(ans)) * _triangle(a.shape[-1], lower, g.dtype)


def einsum_ones_for_identity(g, ans, operands, i, equation):
    """einsum's VJP with ones where a repeated index needs the identity: "ii->i" spreads
    each g[i] over row i instead of placing it at (i, i)."""
    adjoint, others, fill = einsum_adjoint(equation, [x.shape for x in operands], i)
    extra = [np.ones((n, n) if kind == "eye" else n, g.dtype) for kind, n in fill]
    return EINSUM([g, *(operands[k] for k in others), *extra], equation=adjoint)


# fmt: off
FAULTS: tuple[Fault, ...] = (
    Fault(
        "inv.untransposed",
        "inv's VJP leaves out the transposes: -(y @ g @ y) instead of -(y^T @ g @ y^T) "
        "(NumPy's x.transpose(-2, -1) is no transpose)",
        "transpose the inverse on both sides: `-(np.swapaxes(y, -1, -2) @ g @ "
        "np.swapaxes(y, -1, -2))`",
        vjps={("inv", 0): lambda g, ans, x: -(ans @ g @ ans)},
        seen="pytorch/pytorch.github.io#2135",
    ),
    Fault(
        "inv.elementwise",
        "inv's VJP multiplies elementwise, -(y^T * g * y^T), where it needs matrix products",
        "use matmul: `-(np.swapaxes(y, -1, -2) @ g @ np.swapaxes(y, -1, -2))`",
        vjps={("inv", 0): lambda g, ans, x: -(matrix_t(ans) * g * matrix_t(ans))},
        seen="owlbarn/owl#342",
    ),
    Fault(
        "solve.untransposed",
        "solve's VJP solves the adjoint system with a instead of a^T (for b's gradient, and "
        "a's reuses it)",
        "solve against the transpose: `gb = np.linalg.solve(np.swapaxes(a, -1, -2), g)` and "
        "`-(gb @ np.swapaxes(y, -1, -2))` for a",
        vjps={("solve", 0): lambda g, ans, a, b: -(SOLVE(a, g) @ matrix_t(ans)),
              ("solve", 1): lambda g, ans, a, b: SOLVE(a, g)},
        seen="HIPS/autograd#23",
    ),
    Fault(
        "solve.a-dropped",
        "solve's VJP gives the matrix a no gradient: only the right side b is differentiated",
        "a's VJP is `-(np.linalg.solve(np.swapaxes(a, -1, -2), g) @ np.swapaxes(y, -1, -2))`",
        vjps={(op, 0): lambda g, ans, a, b, **attrs: np.zeros_like(a)
              for op in ("solve", "triangular_solve")},
        seen="tensor4all/tenferro-rs#772",
    ),
    Fault(
        "triangular_solve.full-transpose",
        "triangular_solve's VJP transposes with a.T, which reverses every axis, where only "
        "the last two (the matrix's) must swap: on a batch it mixes the matrices",
        "swap only the last two axes: `np.swapaxes(a, -1, -2)` and `np.swapaxes(y, -1, -2)`",
        vjps={("triangular_solve", 0): _tri_a_full_transpose,
              ("triangular_solve", 1): _tri_b_full_transpose},
        seen="elixir-nx/nx#1778",
    ),
    Fault(
        "cholesky.triangular",
        "cholesky's VJP is the lower-triangular gradient of a routine that reads one "
        "triangle, not the symmetrised one TensorFlow gives for the symmetric input",
        "symmetrise it: `(m + np.swapaxes(m, -1, -2)) / 2` (m: L^-T phi(L^T g) L^-1)",
        vjps={("cholesky", 0): cholesky_triangular},
        seen="HIPS/autograd#56",
    ),
    Fault(
        "einsum.repeated-index-ones",
        "einsum's VJP fills a repeated index (\"ii->i\") with ones instead of the identity: "
        "the gradient is spread over whole rows, not placed on the diagonal",
        "contract with the identity for each repeat: `np.einsum(adjoint, g, *others, "
        "*fill)` with `np.eye(n)` for \"ii\"",
        vjps={("einsum", 0): einsum_ones_for_identity},
        seen="pytorch/pytorch#171704",
    ),
)
# fmt: on
