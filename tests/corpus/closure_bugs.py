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


# -- catalogue faults added with the mechanism probes ----------------------------------


class DivNumeratorSelf(ClosureEngine):
    """div's gradient for the numerator divides by a itself instead of by b."""

    def div(self, a: Value, b: Value) -> Value:
        out = super().div(a, b)

        def _backward() -> None:
            self._send(a, out.grad / a.data)
            self._send(b, -out.grad * a.data / (b.data * b.data))

        out._backward = _backward
        return out


class PowPowerRuleExponent(ClosureEngine):
    """pow's gradient for the exponent uses the power rule, a * b**(a - 1), as if b
    were the base."""

    def pow(self, a: Value, b: Value) -> Value:
        out = super().pow(a, b)

        def _backward() -> None:
            self._send(a, out.grad * b.data * a.data ** (b.data - 1))
            self._send(b, out.grad * a.data * b.data ** (a.data - 1))

        out._backward = _backward
        return out


class MaximumInverted(ClosureEngine):
    """maximum/minimum give the gradient to the argument that lost the comparison."""

    def _select(self, a: Value, b: Value, data: np.ndarray, a_wins: np.ndarray) -> Value:
        return super()._select(a, b, data, ~a_wins)


class CosSign(ClosureEngine):
    """cos's gradient is g * sin(x): the minus sign is missing."""

    def cos(self, x: Value) -> Value:
        out = super().cos(x)
        out._backward = lambda: self._send(x, out.grad * np.sin(x.data))
        return out


class ReluGradientMask(ClosureEngine):
    """relu's gradient zeroes the negative entries of g (guided backprop's rule)
    instead of the entries where x is negative."""

    def relu(self, x: Value) -> Value:
        out = super().relu(x)
        out._backward = lambda: self._send(x, out.grad * (out.grad > 0))
        return out


class SoftmaxPassThrough(ClosureEngine):
    """softmax's gradient passes g through unchanged, as if softmax were the identity."""

    def softmax(self, x: Value, axis: int = -1) -> Value:
        out = super().softmax(x, axis)
        out._backward = lambda: self._send(x, out.grad)
        return out


# -- mechanisms (SPEC §6.1): bugs the catalogue does not know ------------------------


class SigmoidIgnoresUpstream(ClosureEngine):
    """sigmoid's closure sends its local derivative y * (1 - y) alone: out.grad is
    never used."""

    def sigmoid(self, x: Value) -> Value:
        out = super().sigmoid(x)
        out._backward = lambda: self._send(x, out.data * (1 - out.data))
        return out


class SinAbsGradient(ClosureEngine):
    """sin's closure uses abs(out.grad): the upstream gradient's sign is lost."""

    def sin(self, x: Value) -> Value:
        out = super().sin(x)
        out._backward = lambda: self._send(x, np.abs(out.grad) * np.cos(x.data))
        return out


class LogPassesGradient(ClosureEngine):
    """log's closure sends out.grad as it is: the factor 1/x is forgotten."""

    def log(self, x: Value) -> Value:
        out = super().log(x)
        out._backward = lambda: self._send(x, out.grad)
        return out


class SigmoidNoBackward(ClosureEngine):
    """sigmoid never sets its `_backward`: its input gets no gradient (micrograd's
    classic forgotten closure)."""

    def sigmoid(self, x: Value) -> Value:
        return Value(1 / (1 + np.exp(-x.data)), (x,))


class SquareNoTwo(ClosureEngine):
    """square's closure sends out.grad * x: the factor 2 is missing."""

    def square(self, x: Value) -> Value:
        out = super().square(x)
        out._backward = lambda: self._send(x, out.grad * x.data)
        return out


class SinSign(ClosureEngine):
    """sin's closure sends -out.grad * cos(x): a stray minus sign."""

    def sin(self, x: Value) -> Value:
        out = super().sin(x)
        out._backward = lambda: self._send(x, -out.grad * np.cos(x.data))
        return out


class MatmulTransposedB(ClosureEngine):
    """matmul's closure sends g^T @ a to b, the right gradient transposed."""

    def matmul(self, a: Value, b: Value) -> Value:
        out = super().matmul(a, b)

        def _backward() -> None:
            self._send(a, out.grad @ np.swapaxes(b.data, -1, -2))
            self._send(b, np.swapaxes(out.grad, -1, -2) @ a.data)

        out._backward = _backward
        return out


class SendWithoutUnbroadcast(ClosureEngine):
    """`_send` adds a closure's share as it comes: a share in the broadcast shape is
    never summed back to its parent's shape (broadcast_to's share neither: it relies
    on `_send` as the binary ops do)."""

    def _send(self, parent: Value, share: np.ndarray) -> None:
        parent.grad = parent.grad + share


def _unsent(x: Value, out: Value) -> Value:
    """`out`, whose closure adds its gradient to x's as it comes, skipping `_send`."""

    def _backward() -> None:
        x.grad = x.grad + out.grad

    out._backward = _backward
    return out


class BroadcastToSkipsSend(ClosureEngine):
    """broadcast_to's closure adds the output's gradient to its input's itself instead
    of through `_send`: it alone is never summed back (the binary ops' shares are)."""

    def broadcast_to(self, x: Value, shape: Sequence[int]) -> Value:
        return _unsent(x, super().broadcast_to(x, shape))


class ExpandDimsSkipsSend(ClosureEngine):
    """expand_dims' closure adds the output's gradient to its input's itself, neither
    reshaped back nor through `_send`: x's gradient keeps the size-1 axis."""

    def expand_dims(self, x: Value, axis: int = 0) -> Value:
        return _unsent(x, super().expand_dims(x, axis))


class SigmoidNaive(ClosureEngine):
    """sigmoid's closure writes the derivative as exp(-x) / (1 + exp(-x))**2, which is
    inf / inf once exp(-x) overflows."""

    def sigmoid(self, x: Value) -> Value:
        out = super().sigmoid(x)

        def _backward() -> None:
            e = np.exp(-x.data)
            self._send(x, out.grad * e / (1 + e) ** 2)

        out._backward = _backward
        return out


class MaximumMaskOnlyNotMinimum(ClosureEngine):
    """maximum's closure (not minimum's) sends the winner masks alone, without out.grad."""

    def maximum(self, a: Value, b: Value) -> Value:
        out = super().maximum(a, b)
        a_wins = a.data >= b.data

        def _backward() -> None:
            self._send(a, np.broadcast_to(a_wins, out.data.shape).astype(out.data.dtype))
            self._send(b, np.broadcast_to(~a_wins, out.data.shape).astype(out.data.dtype))

        out._backward = _backward
        return out


class LogSquared(ClosureEngine):
    """log's closure sends out.grad / x**2: a formula no probe names."""

    def log(self, x: Value) -> Value:
        out = super().log(x)
        out._backward = lambda: self._send(x, out.grad / x.data**2)
        return out


class MaximumSplit(ClosureEngine):
    """A convention, not a bug: a maximum/minimum tie is split 0.5/0.5 between a and b
    (JAX's and autograd's choice; TensorFlow gives it to a), undeclared."""

    def _select(self, a: Value, b: Value, data: np.ndarray, a_wins: np.ndarray) -> Value:
        out = Value(data, (a, b))
        tie = a.data == b.data

        def _backward() -> None:
            self._send(a, out.grad * np.where(tie, 0.5, a_wins))
            self._send(b, out.grad * np.where(tie, 0.5, ~a_wins))

        out._backward = _backward
        return out


# -- the backward driver (SPEC §6.1 `backprop-driver`): every closure right, the walk wrong


def _recursive_grad(
    engine: ClosureEngine, output: Value, wrt: Sequence[Value], cotangent: np.ndarray, *, once: bool
) -> list[np.ndarray]:
    """micrograd PR #64's `backward_bad`: run a value's closure, then recurse into its parents
    at once; `once`: a value already visited is not visited again."""
    engine.zero_grad(engine.topological_order(output))
    output.grad = np.array(cotangent, dtype=output.data.dtype)
    visited: set[Value] = set()

    def backward(value: Value) -> None:
        if once and value in visited:
            return
        visited.add(value)
        value._backward()
        for parent in value._parents:
            backward(parent)

    with np.errstate(all="ignore"):
        backward(output)
    return [np.array(value.grad) for value in wrt]


class RecursiveBackward(ClosureEngine):
    """Per path (karpathy/micrograd PR #64, "it doesn't work where a non-leaf variable is
    re-used"): each value's closure runs, then its parents' at once, so a value reached by
    two paths passes its gradient on twice, the first time with part of it."""

    def grad(self, output: Value, wrt: Sequence[Value], cotangent: np.ndarray) -> list[np.ndarray]:
        return _recursive_grad(self, output, wrt, cotangent, once=False)


class VisitedOnFirstPath(ClosureEngine):
    """Early propagation (lucasdelimanogueira/PyNorch#90: "one of the two paths may be
    visited to stop the other one from doing backprop"): the recursive walk keeps a visited
    set, so a value passes its gradient on when first reached, before its other consumers
    have added to it."""

    def grad(self, output: Value, wrt: Sequence[Value], cotangent: np.ndarray) -> list[np.ndarray]:
        return _recursive_grad(self, output, wrt, cotangent, once=True)


class ForwardOrder(ClosureEngine):
    """A node skipped in effect (karpathy/micrograd#96's post-order walk, `dfs(child)` then
    `v._backward()`): the closures run parents first, so a value passes its gradient on
    before any consumer has given it one, and only the output's closure counts."""

    def topological_order(self, output: Value) -> list[Value]:
        return super().topological_order(output)[::-1]


class ZeroesLeavesOnly(ClosureEngine):
    """Never zeroed (karpathy/micrograd#102: "zero_grad() only zeros the leaf nodes"): the
    intermediate values keep their gradients, so a second pass adds onto the first."""

    def zero_grad(self, values: Sequence[Value]) -> None:
        super().zero_grad([v for v in values if not v._parents])


class NoAccumulateLeavesOnly(ClosureEngine):
    """`NoAccumulate` in an engine that keeps gradients for leaf values only, so gradcheck
    cannot see where the driver goes wrong and the catalogue's fingerprint must say it."""

    intermediate_grads = False

    def _send(self, parent: Value, share: np.ndarray) -> None:
        parent.grad = self.unbroadcast(share, parent.data.shape)


class AddsLaterSharesTwice(ClosureEngine):
    """Not a story gradcheck knows (zou-group/textgrad#200 had the same addition written
    twice): where a value already has a gradient, each further share is added twice."""

    def _send(self, parent: Value, share: np.ndarray) -> None:
        share = self.unbroadcast(share, parent.data.shape)
        parent.grad = parent.grad + 2 * share if parent.grad.any() else share
