"""Bugs planted in the linalg engine, one per class: the catalogue faults of the norms,
losses, clip, inverses, solvers and einsum (catalogue/norms.py, catalogue/linalg.py), each
written as an engine would have it, without gradcheck's code.

    gradcheck run tests/corpus/cases/norms_linalg.yaml -k inv_alone \\
        --engine tests/corpus/linalg_bugs.py:InvUntransposed
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

# gradcheck loads this file by path: make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from linalg_engine import Engine as LinalgEngine
from linalg_engine import _log_softmax, _t
from tape_engine import Shares, reduced_axes


def _norm_terms(g, x, axis, epsilon):
    """1/sqrt(var + epsilon), y, and the means over the normalised axes as a function."""
    axes = reduced_axes(axis, x.ndim)
    centred = x - np.mean(x, axis=axes, keepdims=True)
    inv = 1 / np.sqrt(np.mean(centred**2, axis=axes, keepdims=True) + epsilon)
    return inv, centred * inv, lambda v: np.mean(v, axis=axes, keepdims=True)


class BatchNormConstantStatistics(LinalgEngine):
    """batch_norm's backward treats the batch mean and variance as constants: g / std."""

    def _vjp_batch_norm(self, g, out, x, *, axis, epsilon) -> Shares:
        inv, _, _ = _norm_terms(g, x, axis, epsilon)
        return (g * inv,)


class BatchNormNoVarianceTerm(LinalgEngine):
    """batch_norm's backward differentiates the mean, not the variance (detached)."""

    def _vjp_batch_norm(self, g, out, x, *, axis, epsilon) -> Shares:
        inv, _, mean = _norm_terms(g, x, axis, epsilon)
        return ((g - mean(g)) * inv,)


class LayerNormMeanTwice(LinalgEngine):
    """layer_norm's backward subtracts mean(g) twice (a register not cleared)."""

    def _vjp_layer_norm(self, g, out, x, *, axis, epsilon) -> Shares:
        inv, y, mean = _norm_terms(g, x, axis, epsilon)
        return ((g - mean(g) - mean(g) - y * mean(g * y)) * inv,)


class CrossEntropySign(LinalgEngine):
    """softmax_cross_entropy's logits gradient is labels - softmax, the sign flipped."""

    def _vjp_softmax_cross_entropy(self, g, out, logits, labels, *, axis) -> Shares:
        each = np.expand_dims(g, axis)
        log_p = _log_softmax(logits, axis)
        return (labels - np.exp(log_p)) * each, -log_p * each


class CrossEntropyBatchDivided(LinalgEngine):
    """softmax_cross_entropy's backward divides by the batch size, as a mean loss would."""

    def _vjp_softmax_cross_entropy(self, g, out, logits, labels, *, axis) -> Shares:
        each = np.expand_dims(g, axis) / out.size
        log_p = _log_softmax(logits, axis)
        return (np.exp(log_p) - labels) * each, -log_p * each


class CrossEntropySoftmaxAxis(LinalgEngine):
    """softmax_cross_entropy's backward takes the softmax over dimension 0, the batch."""

    def _vjp_softmax_cross_entropy(self, g, out, logits, labels, *, axis) -> Shares:
        each = np.expand_dims(g, axis)
        return (
            (np.exp(_log_softmax(logits, 0)) - labels) * each,
            -_log_softmax(logits, axis) * each,
        )


class CrossEntropyLabelsConstant(LinalgEngine):
    """softmax_cross_entropy gives the labels no gradient (TensorFlow's v1 fused op)."""

    def _vjp_softmax_cross_entropy(self, g, out, logits, labels, *, axis) -> Shares:
        softmax = np.exp(_log_softmax(logits, axis))
        return (softmax - labels) * np.expand_dims(g, axis), np.zeros_like(labels)


class SparseCrossEntropyBatchDivided(LinalgEngine):
    """sparse_softmax_cross_entropy's backward divides by the batch size whatever follows."""

    def _vjp_sparse_softmax_cross_entropy(self, g, out, logits, labels) -> Shares:
        one_hot = np.arange(logits.shape[-1]) == labels[..., None]
        softmax = np.exp(_log_softmax(logits, -1))
        return (softmax - one_hot) * g[..., None] / labels.size, np.zeros(labels.shape)


class ClipPassThrough(LinalgEngine):
    """clip's backward passes the gradient everywhere, clipped elements too."""

    def _vjp_clip(self, g, out, x, *, lo, hi) -> Shares:
        return (g,)


class ClipBoundsSwapped(LinalgEngine):
    """clip's backward mask is (x <= lo) & (x >= hi): the comparisons inverted."""

    def _vjp_clip(self, g, out, x, *, lo, hi) -> Shares:
        return (g * ((x <= lo) & (x >= hi)),)


class InvUntransposed(LinalgEngine):
    """inv's backward is -(y @ g @ y): NumPy's y.transpose(-2, -1) transposes nothing."""

    def _vjp_inv(self, g, out, x) -> Shares:
        return (-(out.transpose(-2, -1) @ g @ out.transpose(-2, -1)),)


class InvElementwise(LinalgEngine):
    """inv's backward multiplies elementwise where it needs matrix products."""

    def _vjp_inv(self, g, out, x) -> Shares:
        return (-(_t(out) * g * _t(out)),)


class SolveUntransposed(LinalgEngine):
    """solve's backward solves the adjoint system with a, not a^T."""

    def _vjp_solve(self, g, out, a, b) -> Shares:
        grad_b = np.linalg.solve(a, g)
        return -(grad_b @ _t(out)), grad_b


class SolveDropsMatrix(LinalgEngine):
    """solve's backward returns no gradient for the matrix, only for the right side."""

    def _vjp_solve(self, g, out, a, b) -> Shares:
        return np.zeros_like(a), np.linalg.solve(_t(a), g)


class TriangularSolveFullTranspose(LinalgEngine):
    """triangular_solve's backward transposes with .T, reversing the batch axes too."""

    def _vjp_triangular_solve(self, g, out, a, b, *, lower) -> Shares:
        grad_b = self._solve_batched(self._read(a.T, not lower), g)
        return self._read(-(grad_b @ out.T), lower), grad_b


class CholeskyTriangular(LinalgEngine):
    """cholesky's backward is the lower-triangular gradient (the routine reads one
    triangle), not symmetrised."""

    def _vjp_cholesky(self, g, out, x) -> Shares:
        l_inv = np.linalg.inv(out)
        p = _t(out) @ g
        s = _t(l_inv) @ (np.tril(p) - 0.5 * np.eye(p.shape[-1]) * p) @ l_inv
        return (np.tril(s + _t(s)) - np.eye(s.shape[-1]) * s,)


class EinsumOnesForIdentity(LinalgEngine):
    """einsum's backward broadcasts a repeated index's gradient over every position of
    its axes instead of placing it on the diagonal."""

    def _place(self, values, shape, subs, unique):
        # each element gets the value of its first axis per letter, on the diagonal or not
        index = np.indices(shape, sparse=True)
        return np.broadcast_to(values[tuple(index[subs.index(c)] for c in unique)], shape).copy()
