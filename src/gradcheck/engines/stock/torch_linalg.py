"""The stock torch adapter's contractions and solvers (SPEC §3.1), with PyTorch's own
functions: ``torch.tensordot``, ``torch.einsum`` (a repeated index included) and
``torch.linalg``'s inv, det, solve, cholesky and solve_triangular, batched over leading
axes. A mixin of `TorchEngine`.

Conventions, probed on PyTorch 2.13: cholesky's gradient is the symmetrised one, as
TensorFlow's (``torch.linalg.cholesky`` reads the lower triangle, and its backward
symmetrises); solve_triangular's gradient for the matrix is 0 off its triangle, as
TensorFlow's.
"""

from __future__ import annotations

from typing import Any

import torch


def tensordot_dims(axes: Any) -> Any:
    """tensordot's `axes` (an int, or a pair of an int or a list each) as lists of axes."""
    if isinstance(axes, int):
        return axes
    return tuple([a] if isinstance(a, int) else list(a) for a in axes)


class TorchLinalgOps:
    # -- contractions --------------------------------------------------------------------
    def tensordot(self, a, b, axes=None):
        return torch.tensordot(a, b, dims=tensordot_dims(axes))

    def einsum(self, *operands, equation=None):
        return torch.einsum(equation, *operands)

    # -- inverses and solvers --------------------------------------------------------------
    def inv(self, x):
        return torch.linalg.inv(x)

    def det(self, x):
        return torch.linalg.det(x)

    def solve(self, a, b):
        return torch.linalg.solve(a, b)

    def cholesky(self, x):
        return torch.linalg.cholesky(x)

    def triangular_solve(self, a, b, lower=True):
        return torch.linalg.solve_triangular(a, b, upper=not lower)
