"""The tape engine with the normalisations, losses, clip, inverses, solvers and einsum: a
correct engine of the corpus for the ops whose catalogue faults are in catalogue/norms.py
and catalogue/linalg.py.

It extends `tape_engine.Engine` (the Wengert list, its walk and `unbroadcast`) with those
ops, each rule derived on its own rather than taken from gradcheck's registry: the
normalisations' VJP is the batch-norm paper's chain through the variance and the mean,
einsum's writes each operand's gradient through a writeable `np.einsum` view of it, so a
repeated index lands on the diagonal. `linalg_bugs.py` overrides one `_vjp_<op>` (or
`_place`, where einsum's gradient goes) per planted bug.

    gradcheck run cases/solvers.yaml --engine tests/corpus/linalg_engine.py
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# gradcheck loads this file by path: make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from tape_engine import Engine as TapeEngine
from tape_engine import Shares, Var, reduced_axes


def _t(m: np.ndarray) -> np.ndarray:
    """The matrices' transpose: the last two axes swapped, the batch axes kept."""
    return np.swapaxes(m, -1, -2)


def _log_softmax(z: np.ndarray, axis: int) -> np.ndarray:
    shifted = z - np.max(z, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _einsum_parts(equation: str, count: int) -> tuple[list[str], str]:
    text = equation.replace(" ", "")
    lhs, arrow, out = text.partition("->")
    subs = lhs.split(",")
    assert len(subs) == count, equation
    if not arrow:  # implicit: the letters used once, sorted
        used = "".join(subs)
        out = "".join(sorted(c for c in set(used) if used.count(c) == 1))
    return subs, out


class Engine(TapeEngine):
    """The tape engine, with the ops of SPEC §3.1's norms, losses and linear algebra."""

    # -- normalisations -------------------------------------------------------------------
    def layer_norm(self, x: Var, axis: Any = -1, epsilon: float = 1e-5) -> Var:
        return self._norm("layer_norm", x, axis, epsilon)

    def batch_norm(self, x: Var, axis: Any = 0, epsilon: float = 1e-5) -> Var:
        return self._norm("batch_norm", x, axis, epsilon)

    def _norm(self, op: str, x: Var, axis: Any, epsilon: float) -> Var:
        axes = reduced_axes(axis, x.value.ndim)
        centred = x.value - np.mean(x.value, axis=axes, keepdims=True)
        var = np.mean(centred**2, axis=axes, keepdims=True)
        return self._record(op, [x], centred / np.sqrt(var + epsilon), axis=axis, epsilon=epsilon)

    def _norm_grad(self, g, x, axis, epsilon) -> np.ndarray:
        # Ioffe and Szegedy's chain: x reaches y directly, through the variance, and
        # through the mean (which the variance reads too).
        axes = reduced_axes(axis, x.ndim)
        n = np.prod([x.shape[a] for a in axes])
        centred = x - np.mean(x, axis=axes, keepdims=True)
        inv = 1 / np.sqrt(np.mean(centred**2, axis=axes, keepdims=True) + epsilon)
        d_var = np.sum(g * centred, axis=axes, keepdims=True) * -0.5 * inv**3
        d_mean = -np.sum(g * inv, axis=axes, keepdims=True) + d_var * np.mean(
            -2 * centred, axis=axes, keepdims=True
        )
        return g * inv + d_var * 2 * centred / n + d_mean / n

    def _vjp_layer_norm(self, g, out, x, *, axis, epsilon) -> Shares:
        return (self._norm_grad(g, x, axis, epsilon),)

    def _vjp_batch_norm(self, g, out, x, *, axis, epsilon) -> Shares:
        return (self._norm_grad(g, x, axis, epsilon),)

    # -- losses ---------------------------------------------------------------------------
    def softmax_cross_entropy(self, logits: Var, labels: Var, axis: int = -1) -> Var:
        value = -np.sum(labels.value * _log_softmax(logits.value, axis), axis=axis)
        return self._record("softmax_cross_entropy", [logits, labels], value, axis=axis)

    def _vjp_softmax_cross_entropy(self, g, out, logits, labels, *, axis) -> Shares:
        each = np.expand_dims(g, axis)
        log_p = _log_softmax(logits, axis)
        total = np.sum(labels, axis=axis, keepdims=True)  # 1, for probabilities
        return (np.exp(log_p) * total - labels) * each, -log_p * each

    def sparse_softmax_cross_entropy(self, logits: Var, labels: Var) -> Var:
        log_p = _log_softmax(logits.value, -1)
        picked = np.take_along_axis(log_p, labels.value[..., None].astype(int), -1)[..., 0]
        return self._record("sparse_softmax_cross_entropy", [logits, labels], -picked)

    def _vjp_sparse_softmax_cross_entropy(self, g, out, logits, labels) -> Shares:
        one_hot = np.arange(logits.shape[-1]) == labels[..., None]
        softmax = np.exp(_log_softmax(logits, -1))
        return (softmax - one_hot) * g[..., None], np.zeros(labels.shape, g.dtype)

    # -- clip -----------------------------------------------------------------------------
    def clip(self, x: Var, lo: float | None = None, hi: float | None = None) -> Var:
        return self._record("clip", [x], np.clip(x.value, lo, hi), lo=lo, hi=hi)

    def _vjp_clip(self, g, out, x, *, lo, hi) -> Shares:
        return (g * ((x >= lo) & (x <= hi)),)  # TensorFlow: the bounds pass the gradient

    # -- inverses and solvers -------------------------------------------------------------
    def inv(self, x: Var) -> Var:
        return self._record("inv", [x], np.linalg.inv(x.value))

    def _vjp_inv(self, g, out, x) -> Shares:
        return (-(_t(out) @ g @ _t(out)),)

    def solve(self, a: Var, b: Var) -> Var:
        return self._record("solve", [a, b], np.linalg.solve(a.value, b.value))

    def _vjp_solve(self, g, out, a, b) -> Shares:
        grad_b = np.linalg.solve(_t(a), g)
        return -(grad_b @ _t(out)), grad_b

    @staticmethod
    def _read(a: np.ndarray, lower: bool) -> np.ndarray:
        """The triangle of a that triangular_solve reads, the other one zero."""
        return np.tril(a) if lower else np.triu(a)

    @staticmethod
    def _solve_batched(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        return np.linalg.solve(
            np.broadcast_to(a, (*batch, *a.shape[-2:])), np.broadcast_to(b, (*batch, *b.shape[-2:]))
        )

    def triangular_solve(self, a: Var, b: Var, lower: bool = True) -> Var:
        value = self._solve_batched(self._read(a.value, lower), b.value)
        return self._record("triangular_solve", [a, b], value, lower=lower)

    def _vjp_triangular_solve(self, g, out, a, b, *, lower) -> Shares:
        grad_b = self._solve_batched(_t(self._read(a, lower)), g)
        return self._read(-(grad_b @ _t(out)), lower), grad_b

    def cholesky(self, x: Var) -> Var:
        return self._record("cholesky", [x], np.linalg.cholesky(x.value))

    def _vjp_cholesky(self, g, out, x) -> Shares:
        # Murray (2016): L^-T Phi(L^T g) L^-1, Phi the lower triangle with its diagonal
        # halved; then symmetrised, as x is read as a symmetric matrix.
        l_inv = np.linalg.inv(out)
        p = _t(out) @ g
        phi = np.tril(p) - 0.5 * np.eye(p.shape[-1]) * p
        s = _t(l_inv) @ phi @ l_inv
        return ((s + _t(s)) / 2,)

    # -- einsum ---------------------------------------------------------------------------
    def einsum(self, *operands: Var, equation: str) -> Var:
        value = np.einsum(equation, *(v.value for v in operands))
        return self._record("einsum", list(operands), value, equation=equation)

    def _vjp_einsum(self, g, out, *xs, equation) -> Shares:
        subs, out_subs = _einsum_parts(equation, len(xs))
        sizes = {
            c: d for s, x in zip(subs, xs, strict=True) for c, d in zip(s, x.shape, strict=True)
        }
        shares = []
        for i, x in enumerate(xs):
            others = [k for k in range(len(xs)) if k != i]
            reached = set(out_subs).union(*(subs[k] for k in others))
            unique = "".join(dict.fromkeys(subs[i]))  # each letter once, in order
            kept = "".join(c for c in unique if c in reached)
            terms = ",".join([out_subs, *(subs[k] for k in others)])
            summed = np.einsum(f"{terms}->{kept}", g, *(xs[k] for k in others))
            # a letter only this operand has was summed here alone: each element gets g
            full = np.broadcast_to(
                np.expand_dims(summed, [j for j, c in enumerate(unique) if c not in reached]),
                [sizes[c] for c in unique],
            )
            shares.append(self._place(full, x.shape, subs[i], unique))
        return tuple(shares)

    def _place(self, values: np.ndarray, shape: Sequence[int], subs: str, unique: str):
        """An operand's gradient: `values` (one axis per distinct letter) written where the
        operand's elements are, a repeated letter on its diagonal and zero off it."""
        grad = np.zeros(shape, values.dtype)
        np.einsum(f"{subs}->{unique}", grad)[...] = values  # a writeable view of grad
        return grad
