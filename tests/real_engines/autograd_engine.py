"""An adapter for HIPS autograd (a real engine gradcheck did not write), with its conventions.

autograd is functional: it differentiates a Python function of arrays (`make_vjp`). So
the op methods only record a graph of `Lazy` nodes; `value` evaluates it with
`autograd.numpy`, and `grad` turns it into a function of the `wrt` nodes (a node in
`wrt` is replaced by the function's argument, so an intermediate node's gradient holds
everything upstream fixed) and asks autograd for its VJP. relu is `maximum(x, 0)`, as
autograd users write it.

At ties autograd splits: maximum/minimum give each side half (so relu'(0) = 0.5), pow's
exponent is NaN where the base is negative. The adapter declares those conventions.

    gradcheck run cases/ --engine tests/real_engines/autograd_engine.py
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import autograd.numpy as anp
import numpy as np
from autograd import make_vjp
from autograd.tracer import getval

DTYPES = (np.float32, np.float64)


class Lazy:
    """A value of the graph: a leaf's array, or `fn` applied to other nodes."""

    def __init__(self, fn: Callable[..., Any] | None, args: Sequence[Any], value: Any = None):
        self.fn, self.args, self.value = fn, list(args), value


def _axis(axis: object) -> object:
    return tuple(axis) if isinstance(axis, list) else axis


def _logsumexp(x, axis, keepdims):
    shift = np.max(getval(x), axis=_axis(axis), keepdims=True)  # a constant: no gradient
    shift = np.where(np.isfinite(shift), shift, 0)
    out = anp.log(anp.sum(anp.exp(x - shift), axis=_axis(axis), keepdims=True)) + shift
    return out if keepdims else anp.squeeze(out, axis=_axis(axis))


def _softmax(x, axis):
    e = anp.exp(x - np.max(getval(x), axis=axis, keepdims=True))
    return e / anp.sum(e, axis=axis, keepdims=True)


def _log_softmax(x, axis):
    shifted = x - np.max(getval(x), axis=axis, keepdims=True)
    return shifted - anp.log(anp.sum(anp.exp(shifted), axis=axis, keepdims=True))


def _squeeze(x, axis):
    if axis is None or axis == []:
        axis = tuple(i for i, d in enumerate(anp.shape(x)) if d == 1)
    return anp.squeeze(x, axis=_axis(axis))


# Each op as a function of arrays (autograd.numpy traces them).
OPS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: anp.power(a, b),
    "maximum": anp.maximum,
    "minimum": anp.minimum,
    "neg": lambda x: -x,
    "exp": anp.exp,
    "log": anp.log,
    "sqrt": anp.sqrt,
    "abs": anp.abs,
    "square": anp.square,
    "sin": anp.sin,
    "cos": anp.cos,
    "tanh": anp.tanh,
    "sigmoid": lambda x: 1 / (1 + anp.exp(-x)),
    "relu": lambda x: anp.maximum(x, 0.0),
    "matmul": anp.matmul,
    "sum": lambda x, axis=None, keepdims=False: anp.sum(x, _axis(axis), keepdims=keepdims),
    "mean": lambda x, axis=None, keepdims=False: anp.mean(x, _axis(axis), keepdims=keepdims),
    "max": lambda x, axis=None, keepdims=False: anp.max(x, _axis(axis), keepdims=keepdims),
    "min": lambda x, axis=None, keepdims=False: anp.min(x, _axis(axis), keepdims=keepdims),
    "logsumexp": lambda x, axis=None, keepdims=False: _logsumexp(x, axis, keepdims),
    "reshape": lambda x, shape: anp.reshape(x, tuple(shape)),
    "transpose": lambda x, perm=None: anp.transpose(x, None if perm is None else tuple(perm)),
    "matrix_transpose": lambda x: anp.swapaxes(x, -1, -2),
    "expand_dims": lambda x, axis=0: anp.expand_dims(x, axis),
    "squeeze": lambda x, axis=None: _squeeze(x, axis),
    "broadcast_to": lambda x, shape: anp.broadcast_to(x, tuple(shape)),
    "concat": lambda *xs, axis=0: anp.concatenate(xs, axis=axis),
    "stack": lambda *xs, axis=0: anp.stack(xs, axis=axis),
    "getitem": lambda x, index: x[index],
    "softmax": lambda x, axis=-1: _softmax(x, axis),
    "log_softmax": lambda x, axis=-1: _log_softmax(x, axis),
}


class Engine:
    name = "autograd"
    conventions: ClassVar[dict[str, str]] = {
        "maximum": "split",
        "minimum": "split",
        "relu": "half",
        "pow": "nan",
    }

    def leaf(self, name: str, value: np.ndarray) -> Lazy:
        return self.constant(value)

    def constant(self, value: np.ndarray) -> Lazy:
        if value.dtype.type not in DTYPES:
            raise NotImplementedError(f"this adapter runs float32/float64, not {value.dtype}")
        return Lazy(None, [], value)

    def value(self, node: Lazy) -> np.ndarray:
        return np.asarray(self._evaluate(node, {}))

    def grad(self, output: Lazy, wrt: Sequence[Lazy], cotangent: np.ndarray) -> list:
        """One VJP per wrt node: the output as a function of that node's value alone."""
        grads = []
        for node in wrt:
            vjp, _ = make_vjp(lambda v, n=node: self._evaluate(output, {id(n): v}))(
                self.value(node)
            )
            grads.append(np.asarray(vjp(cotangent)))
        return grads

    def _evaluate(self, node: Lazy, given: dict[int, Any]) -> Any:
        """The node's value, with the nodes in `given` replaced by their given values."""
        if id(node) in given:
            return given[id(node)]
        if node.fn is None:
            return node.value
        op, attrs = node.fn
        args = [self._evaluate(a, given) for a in node.args]
        return OPS[op](*args, **attrs)


def _op_method(op: str) -> Callable[..., Lazy]:
    def method(self: Engine, *args: Any, **attrs: Any) -> Lazy:
        nodes = list(args[0]) if op in ("concat", "stack") else list(args)
        return Lazy((op, attrs), nodes)

    method.__name__ = op
    return method


for _op in OPS:
    setattr(Engine, _op, _op_method(_op))
