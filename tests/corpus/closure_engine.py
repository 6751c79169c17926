"""A micrograd-style engine on NumPy arrays: a correct engine of the corpus.

Each `Value` holds an array, its gradient, the values it was computed from and a
`_backward` closure, written by the op that made it, that passes the value's gradient
on to those parents. `grad` sorts the graph topologically (iteratively, so deep graphs
are no problem), zeroes every gradient, seeds the output with the cotangent and calls
the closures from the output back. A closure hands each parent its share through
`_send`, which sums the share back to the parent's shape (`unbroadcast`) and adds it
to the parent's gradient: a value used twice gets both shares.

`closure_bugs.py` plants one bug per subclass by overriding an op method (calling
`super()` for the forward value and swapping in a wrong closure), or one of the
steps `_send`, `unbroadcast`, `zero_grad`, `topological_order` or `grad` itself. A bug
class may also set `intermediate_grads = False`: the engine then refuses gradients
with respect to intermediate values, as PyTorch keeps no `.grad` for a non-leaf. No
`concat` or `stack`: gradcheck skips the cases that need them.

    gradcheck run cases/ --engine tests/corpus/closure_engine.py
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Axis = int | Sequence[int] | None


class Value:
    """An array in the graph, with its gradient and the closure that propagates it."""

    __slots__ = ("_backward", "_parents", "data", "grad", "label")

    def __init__(self, data: Any, parents: Sequence[Value] = (), label: str = "") -> None:
        self.data = np.asarray(data)
        self.grad = np.zeros_like(self.data)
        self.label = label
        self._parents = tuple(parents)
        self._backward: Callable[[], None] = lambda: None  # a leaf passes nothing on

    def __repr__(self) -> str:
        return f"Value({self.label or '?'}, shape={self.data.shape})"


def topological_order(output: Value) -> list[Value]:
    """Every value `output` depends on, each after its parents (iterative depth-first)."""
    order: list[Value] = []
    visited: set[Value] = set()
    stack: list[tuple[Value, bool]] = [(output, False)]
    while stack:
        value, parents_done = stack.pop()
        if parents_done:
            order.append(value)
        elif value not in visited:
            visited.add(value)
            stack.append((value, True))
            stack.extend((p, False) for p in value._parents if p not in visited)
    return order


def _axes(axis: Axis, ndim: int) -> tuple[int, ...]:
    """The axes a reduction reduces, non-negative and sorted."""
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(a % ndim for a in ([axis] if isinstance(axis, int) else axis)))


class Engine:
    """Values with backward closures, micrograd-style, over NumPy arrays."""

    name = "closure"
    intermediate_grads = True  # gives gradients with respect to non-leaf values too

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = f"closure/{cls.__name__}"  # a planted bug shows up under its own name

    # -- the adapter protocol -------------------------------------------------------------
    def leaf(self, name: str, value: np.ndarray) -> Value:
        return Value(value, label=name)

    def constant(self, value: np.ndarray) -> Value:
        return Value(value)

    def value(self, node: Value) -> np.ndarray:
        return node.data

    def grad(self, output: Value, wrt: Sequence[Value], cotangent: np.ndarray) -> list[np.ndarray]:
        """Zero the graph's gradients, seed the output, run the closures output-first."""
        if not self.intermediate_grads and any(value._parents for value in wrt):
            raise ValueError("gradients are kept for leaf values only")
        order = self.topological_order(output)
        self.zero_grad(order)
        output.grad = np.array(cotangent, dtype=output.data.dtype)
        with np.errstate(all="ignore"):  # inf and nan are results, not warnings
            for value in reversed(order):
                value._backward()
        return [np.array(value.grad) for value in wrt]

    # -- the steps every closure relies on --------------------------------------------------
    def topological_order(self, output: Value) -> list[Value]:
        """The values the closures run over (reversed): each after its parents."""
        return topological_order(output)

    def zero_grad(self, values: Sequence[Value]) -> None:
        """Forget the gradients of an earlier `grad` call."""
        for value in values:
            value.grad = np.zeros_like(value.data)

    def _send(self, parent: Value, share: np.ndarray) -> None:
        """Add a closure's share to `parent`'s gradient, summed back to its shape."""
        parent.grad = parent.grad + self.unbroadcast(share, parent.data.shape)

    def unbroadcast(self, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Undo broadcasting: sum away the extra leading axes, then sum (keeping them)
        the axes where the parent had size 1."""
        while share.ndim > len(shape):
            share = share.sum(axis=0)
        for axis, size in enumerate(shape):
            if size == 1 and share.shape[axis] != 1:
                share = share.sum(axis=axis, keepdims=True)
        return share

    # -- elementwise binary ops -----------------------------------------------------------
    def add(self, a: Value, b: Value) -> Value:
        out = Value(a.data + b.data, (a, b))

        def _backward() -> None:
            self._send(a, out.grad)
            self._send(b, out.grad)

        out._backward = _backward
        return out

    def sub(self, a: Value, b: Value) -> Value:
        out = Value(a.data - b.data, (a, b))

        def _backward() -> None:
            self._send(a, out.grad)
            self._send(b, -out.grad)

        out._backward = _backward
        return out

    def mul(self, a: Value, b: Value) -> Value:
        out = Value(a.data * b.data, (a, b))

        def _backward() -> None:
            self._send(a, out.grad * b.data)
            self._send(b, out.grad * a.data)

        out._backward = _backward
        return out

    def div(self, a: Value, b: Value) -> Value:
        out = Value(a.data / b.data, (a, b))

        def _backward() -> None:
            self._send(a, out.grad / b.data)
            self._send(b, -out.grad * a.data / (b.data * b.data))

        out._backward = _backward
        return out

    def pow(self, a: Value, b: Value) -> Value:
        out = Value(a.data**b.data, (a, b))

        def _backward() -> None:
            positive = a.data > 0  # TensorFlow: no exponent gradient where the base is <= 0
            log_a = np.where(positive, np.log(np.where(positive, a.data, 1)), 0)
            self._send(a, out.grad * b.data * a.data ** (b.data - 1))
            self._send(b, out.grad * out.data * log_a)

        out._backward = _backward
        return out

    def maximum(self, a: Value, b: Value) -> Value:
        return self._select(a, b, np.maximum(a.data, b.data), a.data >= b.data)

    def minimum(self, a: Value, b: Value) -> Value:
        return self._select(a, b, np.minimum(a.data, b.data), a.data <= b.data)

    def _select(self, a: Value, b: Value, data: np.ndarray, a_wins: np.ndarray) -> Value:
        """maximum/minimum: the gradient goes to the winner, ties to `a` (as in TensorFlow)."""
        out = Value(data, (a, b))

        def _backward() -> None:
            self._send(a, out.grad * a_wins)
            self._send(b, out.grad * ~a_wins)

        out._backward = _backward
        return out

    # -- elementwise unary ops ------------------------------------------------------------
    def neg(self, x: Value) -> Value:
        out = Value(-x.data, (x,))
        out._backward = lambda: self._send(x, -out.grad)
        return out

    def exp(self, x: Value) -> Value:
        out = Value(np.exp(x.data), (x,))
        out._backward = lambda: self._send(x, out.grad * out.data)
        return out

    def log(self, x: Value) -> Value:
        out = Value(np.log(x.data), (x,))
        out._backward = lambda: self._send(x, out.grad / x.data)
        return out

    def sqrt(self, x: Value) -> Value:
        out = Value(np.sqrt(x.data), (x,))
        out._backward = lambda: self._send(x, out.grad * 0.5 / out.data)
        return out

    def abs(self, x: Value) -> Value:
        out = Value(np.abs(x.data), (x,))
        out._backward = lambda: self._send(x, out.grad * np.sign(x.data))  # abs'(0) = 0
        return out

    def square(self, x: Value) -> Value:
        out = Value(x.data * x.data, (x,))
        out._backward = lambda: self._send(x, out.grad * 2 * x.data)
        return out

    def sin(self, x: Value) -> Value:
        out = Value(np.sin(x.data), (x,))
        out._backward = lambda: self._send(x, out.grad * np.cos(x.data))
        return out

    def cos(self, x: Value) -> Value:
        out = Value(np.cos(x.data), (x,))
        out._backward = lambda: self._send(x, -out.grad * np.sin(x.data))
        return out

    def tanh(self, x: Value) -> Value:
        out = Value(np.tanh(x.data), (x,))
        out._backward = lambda: self._send(x, out.grad * (1 - out.data * out.data))
        return out

    def sigmoid(self, x: Value) -> Value:
        with np.errstate(over="ignore"):  # exp(-x) overflows for x far below 0: y is 0
            out = Value(1 / (1 + np.exp(-x.data)), (x,))
        out._backward = lambda: self._send(x, out.grad * out.data * (1 - out.data))
        return out

    def relu(self, x: Value) -> Value:
        out = Value(np.maximum(x.data, 0), (x,))
        out._backward = lambda: self._send(x, out.grad * (x.data > 0))  # relu'(0) = 0
        return out

    # -- linear algebra -------------------------------------------------------------------
    def matmul(self, a: Value, b: Value) -> Value:
        out = Value(a.data @ b.data, (a, b))

        def _backward() -> None:
            # Transpose the last two axes only; `_send` sums broadcast batch axes away.
            self._send(a, out.grad @ np.swapaxes(b.data, -1, -2))
            self._send(b, np.swapaxes(a.data, -1, -2) @ out.grad)

        out._backward = _backward
        return out

    # -- reductions -----------------------------------------------------------------------
    @staticmethod
    def _kept(g: np.ndarray, x: Value, axis: Axis, keepdims: bool) -> np.ndarray:
        """A reduction's output-shaped array with the reduced axes put back, as size 1."""
        return g if keepdims else np.expand_dims(g, _axes(axis, x.data.ndim))

    def _spread(self, g: np.ndarray, x: Value, axis: Axis, keepdims: bool) -> np.ndarray:
        """A reduction's gradient copied to every element it reduced."""
        return np.broadcast_to(self._kept(g, x, axis, keepdims), x.data.shape)

    def sum(self, x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
        out = Value(np.sum(x.data, axis=_axes(axis, x.data.ndim), keepdims=keepdims), (x,))
        out._backward = lambda: self._send(x, self._spread(out.grad, x, axis, keepdims))
        return out

    def mean(self, x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
        axes = _axes(axis, x.data.ndim)
        out = Value(np.mean(x.data, axis=axes, keepdims=keepdims), (x,))
        count = np.prod([x.data.shape[i] for i in axes])  # elements per mean, not x.size
        out._backward = lambda: self._send(x, self._spread(out.grad, x, axis, keepdims) / count)
        return out

    def max(self, x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
        return self._extremum(np.max, x, axis, keepdims)

    def min(self, x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
        return self._extremum(np.min, x, axis, keepdims)

    def _extremum(self, fn: Callable, x: Value, axis: Axis, keepdims: bool) -> Value:
        axes = _axes(axis, x.data.ndim)
        out = Value(fn(x.data, axis=axes, keepdims=keepdims), (x,))

        def _backward() -> None:
            winners = x.data == self._kept(out.data, x, axis, keepdims)
            split = winners / winners.sum(axis=axes, keepdims=True)  # ties share equally
            self._send(x, self._kept(out.grad, x, axis, keepdims) * split)

        out._backward = _backward
        return out

    def logsumexp(self, x: Value, axis: Axis = None, keepdims: bool = False) -> Value:
        axes = _axes(axis, x.data.ndim)
        peak = np.max(x.data, axis=axes, keepdims=True)
        peak = np.where(np.isfinite(peak), peak, 0)
        kept = np.log(np.sum(np.exp(x.data - peak), axis=axes, keepdims=True)) + peak
        out = Value(kept if keepdims else np.squeeze(kept, axis=axes), (x,))
        out._backward = lambda: self._send(
            x, self._kept(out.grad, x, axis, keepdims) * np.exp(x.data - kept)
        )
        return out

    # -- shape ops ------------------------------------------------------------------------
    def _reshaped(self, x: Value, data: np.ndarray) -> Value:
        """Any op that keeps the elements in order: the gradient is reshaped back."""
        out = Value(data, (x,))
        out._backward = lambda: self._send(x, np.reshape(out.grad, x.data.shape))
        return out

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        return self._reshaped(x, np.reshape(x.data, shape))

    def expand_dims(self, x: Value, axis: int = 0) -> Value:
        return self._reshaped(x, np.expand_dims(x.data, axis))

    def squeeze(self, x: Value, axis: Axis = None) -> Value:
        if axis is None or axis == []:  # TensorFlow: no axes named squeezes every size-1 axis
            return self._reshaped(x, np.squeeze(x.data))
        return self._reshaped(x, np.squeeze(x.data, _axes(axis, x.data.ndim)))

    def transpose(self, x: Value, perm: Sequence[int] | None = None) -> Value:
        order = list(range(x.data.ndim))[::-1] if perm is None else list(perm)
        out = Value(np.transpose(x.data, order), (x,))
        out._backward = lambda: self._send(x, np.transpose(out.grad, np.argsort(order)))
        return out

    def matrix_transpose(self, x: Value) -> Value:
        out = Value(np.swapaxes(x.data, -1, -2), (x,))
        out._backward = lambda: self._send(x, np.swapaxes(out.grad, -1, -2))
        return out

    def broadcast_to(self, x: Value, shape: Sequence[int]) -> Value:
        out = Value(np.broadcast_to(x.data, shape), (x,))
        out._backward = lambda: self._send(x, out.grad)  # `_send` sums it back
        return out

    def getitem(self, x: Value, index: tuple) -> Value:
        out = Value(x.data[index], (x,))

        def _backward() -> None:
            scattered = np.zeros_like(x.data, dtype=out.grad.dtype)
            scattered[index] = out.grad  # basic indexing never repeats an element
            self._send(x, scattered)

        out._backward = _backward
        return out

    # -- nn -------------------------------------------------------------------------------
    def softmax(self, x: Value, axis: int = -1) -> Value:
        e = np.exp(x.data - np.max(x.data, axis=axis, keepdims=True))
        out = Value(e / np.sum(e, axis=axis, keepdims=True), (x,))

        def _backward() -> None:
            # The Jacobian diag(s) - s s^T is not diagonal: each input moves the whole row.
            s = out.data
            self._send(x, s * (out.grad - np.sum(out.grad * s, axis=axis, keepdims=True)))

        out._backward = _backward
        return out

    def log_softmax(self, x: Value, axis: int = -1) -> Value:
        shifted = x.data - np.max(x.data, axis=axis, keepdims=True)
        out = Value(shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True)), (x,))
        out._backward = lambda: self._send(
            x, out.grad - np.exp(out.data) * np.sum(out.grad, axis=axis, keepdims=True)
        )
        return out
