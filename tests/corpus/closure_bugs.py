"""Planted bugs in the micrograd-style engine: each class is `closure_engine.Engine` with
one bug.

An op bug calls the correct op for its forward value and swaps in a wrong `_backward`
closure; the other bugs override one step shared by every closure. The registry in
`__init__.py` names the case that shows each bug and the hint gradcheck should give::

    gradcheck run tests/corpus/cases/backprop.yaml -k fan_out_through_exp \\
        --engine tests/corpus/closure_bugs.py:NoAccumulate
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# gradcheck loads this file by path: make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from closure_engine import Axis, Value
from closure_engine import Engine as ClosureEngine


class BroadcastLeadingOnly(ClosureEngine):
    """unbroadcast sums the extra leading axes but not the axes where the argument had
    size 1 (the seed question's unbroadcast)."""

    def unbroadcast(self, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        while share.ndim > len(shape):
            share = share.sum(axis=0)
        return share


class SubSign(ClosureEngine):
    """sub's gradient for b is +g: the minus sign is missing."""

    def sub(self, a: Value, b: Value) -> Value:
        out = super().sub(a, b)

        def _backward() -> None:
            self._send(a, out.grad)
            self._send(b, out.grad)

        out._backward = _backward
        return out


class DivSquare(ClosureEngine):
    """div's gradient for the denominator is -g * a / b: b is not squared."""

    def div(self, a: Value, b: Value) -> Value:
        out = super().div(a, b)

        def _backward() -> None:
            self._send(a, out.grad / b.data)
            self._send(b, -out.grad * a.data / b.data)

        out._backward = _backward
        return out


class TanhFromInput(ClosureEngine):
    """tanh's gradient is computed from the input, g * (1 - x**2), not from the output."""

    def tanh(self, x: Value) -> Value:
        out = super().tanh(x)
        out._backward = lambda: self._send(x, out.grad * (1 - x.data**2))
        return out


class LogInverted(ClosureEngine):
    """log's gradient multiplies by x instead of dividing by it."""

    def log(self, x: Value) -> Value:
        out = super().log(x)
        out._backward = lambda: self._send(x, out.grad * x.data)
        return out


class MeanNoDivide(ClosureEngine):
    """mean's gradient is sum's: it never divides by the number of elements averaged."""

    def mean(self, x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
        out = super().mean(x, axis, keepdims)
        out._backward = lambda: self._send(x, self._spread(out.grad, x, axis, keepdims))
        return out


class SumNoExpand(ClosureEngine):
    """sum's gradient is broadcast to the input's shape without re-inserting the reduced
    axes, so it lines up with the wrong axis."""

    def sum(self, x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
        out = super().sum(x, axis, keepdims)
        out._backward = lambda: self._send(x, np.broadcast_to(out.grad, x.data.shape))
        return out


class SoftmaxDiagonal(ClosureEngine):
    """softmax's gradient uses only the Jacobian's diagonal: g * s * (1 - s)."""

    def softmax(self, x: Value, axis: int = -1) -> Value:
        out = super().softmax(x, axis)
        out._backward = lambda: self._send(x, out.grad * out.data * (1 - out.data))
        return out


class NoAccumulate(ClosureEngine):
    """A value used twice keeps only the last share of its gradient: `=` instead of `+=`."""

    def _send(self, parent: Value, share: np.ndarray) -> None:
        parent.grad = self.unbroadcast(share, parent.data.shape)


class StaleGradients(ClosureEngine):
    """Not in the catalogue: the inputs' gradients are never zeroed, so a second `grad`
    call adds onto the first (a forgotten zero_grad)."""

    def zero_grad(self, values: Sequence[Value]) -> None:
        super().zero_grad([v for v in values if v._parents])
