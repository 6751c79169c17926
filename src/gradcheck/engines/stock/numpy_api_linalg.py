"""Contractions and solvers (SPEC §3.1) the NumPy way, for the adapters with a
NumPy-compatible module `xp` (JAX, HIPS autograd): ``xp.tensordot``, ``xp.einsum`` and
``xp.linalg``'s inv, det, solve and cholesky. A mixin beside `NumpyApiOps`; each
adapter adds its own triangular_solve (NumPy has none)."""

from __future__ import annotations

from typing import Any


def tensordot_axes(axes: Any) -> Any:
    """tensordot's `axes` (an int, or a pair of an int or a list each) as lists of axes."""
    if isinstance(axes, int):
        return axes
    return tuple([a] if isinstance(a, int) else list(a) for a in axes)


class NumpyApiLinalgOps:
    xp: Any  # the engine's NumPy-compatible module

    def tensordot(self, a, b, axes=None):
        return self.xp.tensordot(a, b, tensordot_axes(axes))

    def einsum(self, *operands, equation=None):
        return self.xp.einsum(equation, *operands)

    def inv(self, x):
        return self.xp.linalg.inv(x)

    def det(self, x):
        return self.xp.linalg.det(x)

    def solve(self, a, b):
        return self.xp.linalg.solve(a, b)

    def cholesky(self, x):
        return self.xp.linalg.cholesky(x)
