"""Planted bugs in the tape engine: each class is `tape_engine.Engine` with one bug.

Each overrides one seam of the engine and says in its docstring what is wrong; the
registry in `__init__.py` names the case that shows it and the hint gradcheck should
give first::

    gradcheck run tests/corpus/cases/elementwise.yaml -k mul_plus_other \\
        --engine tests/corpus/tape_bugs.py:MulSelf
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

# gradcheck loads this file by path: make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from tape_engine import Engine as TapeEngine
from tape_engine import Entry, Shares, Var


class BroadcastNoReduce(TapeEngine):
    """Gradients are never summed back to the argument's shape: unbroadcast is a no-op."""

    def unbroadcast(self, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return share


class MulSelf(TapeEngine):
    """mul's gradient for a is g * a, the argument itself, instead of g * b."""

    def _vjp_mul(self, g, out, a, b) -> Shares:
        return g * a, g * a


class DivSign(TapeEngine):
    """div's gradient for the denominator lost its minus sign: +g * a / b**2."""

    def _vjp_div(self, g, out, a, b) -> Shares:
        return g / b, g * a / (b * b)


class PowExponent(TapeEngine):
    """pow's gradient for the base keeps the exponent: g * b * a**b, not a**(b - 1)."""

    def _vjp_pow(self, g, out, a, b) -> Shares:
        _, for_exponent = super()._vjp_pow(g, out, a, b)
        return g * b * a**b, for_exponent


class MeanTotalSize(TapeEngine):
    """mean's gradient divides by the input's total size, not by the number of elements
    each mean averages."""

    def _vjp_mean(self, g, out, x, *, axis, keepdims) -> Shares:
        return (np.broadcast_to(self._kept(g, x, axis, keepdims), x.shape) / x.size,)


class MaxAllTies(TapeEngine):
    """max/min give the whole gradient to every tied element instead of splitting it."""

    def _tie_weights(self, winners: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return winners


class TransposePermNotInverted(TapeEngine):
    """transpose's gradient applies perm again instead of its inverse."""

    def _vjp_transpose(self, g, out, x, *, perm) -> Shares:
        return (np.transpose(g, perm),)


class NoUpstream(TapeEngine):
    """Every VJP is fed ones instead of the upstream gradient: no chain rule."""

    def _upstream(self, grads: dict[Var, np.ndarray], entry: Entry) -> np.ndarray:
        return np.ones_like(grads[entry.output])


class SigmoidForwardIsTanh(TapeEngine):
    """Not in the catalogue: the forward pass computes sigmoid as tanh."""

    def sigmoid(self, x: Var) -> Var:
        return self._unary("sigmoid", x, np.tanh)
