"""The fault catalogue: known autodiff bugs, each a small named change to the builtin engine.

A `Fault` replaces one VJP rule, the unbroadcast step of some ops, or the backward
driver. `FaultyEngine` is the builtin engine with one fault switched on; the correct
code path in `engines/builtin.py` never branches on a fault. When an engine fails a
case, the faults relevant to it are run, and every one that reproduces the engine's
numbers becomes a `fault:<name>` hint of confidence `exact`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engines.builtin import BuiltinEngine, Tensor
from ..ops import Op, get_op
from ..ops.broadcast import expand_reduced
from ..ops.reductions import spread
from ..ops.registry import VJP

Reduce = Callable[[np.ndarray, tuple[int, ...]], np.ndarray]


@dataclass(frozen=True)
class Fault:
    name: str  # "<op>.<variant>", or "broadcast.*" / "backprop.*" for the shared steps
    summary: str  # the bug, in one sentence
    fix: str  # what to change, in one line
    vjps: Mapping[tuple[str, int], VJP] = field(default_factory=dict)  # (op, arg) -> rule
    reduce: Reduce | None = None  # replaces unbroadcast ...
    reduce_ops: frozenset[str] = frozenset()  # ... for these ops
    driver: str | None = None  # a backward-driver variant, see FaultyEngine.backward

    @property
    def ops(self) -> frozenset[str]:
        """The ops whose presence in an expression makes this fault worth trying."""
        return frozenset(op for op, _ in self.vjps) | self.reduce_ops

    @property
    def code(self) -> str:
        return f"fault:{self.name}"


def _full_t(x: np.ndarray) -> np.ndarray:
    return np.transpose(x)


def _leading_only(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    lead = g.ndim - len(shape)
    return g.sum(axis=tuple(range(lead))) if lead > 0 else g


def _no_reduce(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return g


def _all_ties(g, ans, x, axis, keepdims):
    return spread(g, x, axis, keepdims) * (x == expand_reduced(ans, x.shape, axis, keepdims))


def _traversal_order_backward(
    engine: FaultyEngine, output: Tensor, cotangent: np.ndarray
) -> dict[Tensor, np.ndarray]:
    """The seed's loop: a FIFO of tensors, each propagated when popped, parents queued if absent."""
    grads: dict[Tensor, np.ndarray] = {output: cotangent}
    working = [output]
    while working:
        tensor = working.pop(0)
        if tensor.op is None:
            continue
        for i, arg in enumerate(tensor.args):
            if not arg.requires_grad:
                continue
            share = engine.vjp(tensor, i, grads[tensor])
            engine.accumulate(grads, arg, engine.reduce_to_shape(tensor.op, share, arg.value.shape))
            if arg not in working:
                working.append(arg)
    return grads


BINARY_ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "pow", "maximum", "minimum"})

CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "matmul.full-transpose",
        "matmul's VJP transposes the other operand with a full transpose (tf.transpose "
        "without perm reverses every axis) where a batched matmul must swap only the last two",
        "swap only the last two axes: tf.linalg.matrix_transpose(b), or "
        "tf.matmul(g, b, transpose_b=True)",
        vjps={
            ("matmul", 0): lambda g, ans, a, b: g @ _full_t(b),
            ("matmul", 1): lambda g, ans, a, b: _full_t(a) @ g,
        },
    ),
    Fault(
        "matmul.no-batch-reduce",
        "matmul's gradient for an operand whose batch axes were broadcast is not summed "
        "back over those axes",
        "sum the gradient over the broadcast batch axes (unbroadcast it to the operand's shape)",
        reduce=_no_reduce,
        reduce_ops=frozenset({"matmul"}),
    ),
    Fault(
        "broadcast.no-reduce",
        "gradients of broadcasting ops are not summed back to the argument's shape",
        "unbroadcast: sum over the extra leading axes and, keeping them, over the axes "
        "where the argument had size 1",
        reduce=_no_reduce,
        reduce_ops=BINARY_ELEMENTWISE,
    ),
    Fault(
        "broadcast.leading-only",
        "unbroadcast sums over the extra leading axes but not over the axes where the "
        "argument had size 1",
        "also sum (with keepdims=True) over every axis where the argument had size 1",
        reduce=_leading_only,
        reduce_ops=BINARY_ELEMENTWISE | {"matmul"},
    ),
    Fault(
        "mul.self",
        "mul's VJP multiplies the upstream gradient by the argument itself instead of "
        "by the other operand",
        "d(a*b)/da is b: return g * b for a and g * a for b",
        vjps={("mul", 0): lambda g, ans, a, b: g * a},
    ),
    Fault(
        "sub.sign",
        "sub's VJP for the second operand keeps the sign: it must be negated",
        "return -g for b in a - b",
        vjps={("sub", 1): lambda g, ans, a, b: g},
    ),
    Fault(
        "div.sign",
        "div's VJP for the denominator lost its minus sign",
        "d(a/b)/db is -a / b**2: return -g * a / b**2",
        vjps={("div", 1): lambda g, ans, a, b: g * a / (b * b)},
    ),
    Fault(
        "div.square",
        "div's VJP for the denominator divides by b instead of b**2",
        "d(a/b)/db is -a / b**2: return -g * a / b**2",
        vjps={("div", 1): lambda g, ans, a, b: -g * a / b},
    ),
    Fault(
        "pow.exponent",
        "pow's VJP for the base keeps the exponent: it uses b * a**b instead of b * a**(b-1)",
        "d(a**b)/da is b * a**(b - 1)",
        vjps={("pow", 0): lambda g, ans, a, b: g * b * np.power(a, b)},
    ),
    Fault(
        "tanh.from-input",
        "tanh's VJP computes 1 - x**2 from the input instead of 1 - y**2 from the output",
        "use the output: g * (1 - tanh(x)**2)",
        vjps={("tanh", 0): lambda g, ans, x: g * (1 - x * x)},
    ),
    Fault(
        "sigmoid.from-input",
        "sigmoid's VJP computes x * (1 - x) from the input instead of s * (1 - s) from the output",
        "use the output s = sigmoid(x): g * s * (1 - s)",
        vjps={("sigmoid", 0): lambda g, ans, x: g * x * (1 - x)},
    ),
    Fault(
        "relu.kink",
        "relu's VJP passes the gradient at x == 0, where TensorFlow takes relu'(0) = 0",
        "use g * (x > 0), not g * (x >= 0)",
        vjps={("relu", 0): lambda g, ans, x: g * (x >= 0)},
    ),
    Fault(
        "log.inverted",
        "log's VJP multiplies by x instead of dividing by it",
        "d log(x)/dx is 1/x: return g / x",
        vjps={("log", 0): lambda g, ans, x: g * x},
    ),
    Fault(
        "sqrt.no-half",
        "sqrt's VJP is missing the factor 1/2",
        "d sqrt(x)/dx is 0.5 / sqrt(x)",
        vjps={("sqrt", 0): lambda g, ans, x: g / ans},
    ),
    Fault(
        "mean.no-divide",
        "mean's VJP is sum's: it does not divide by the number of averaged elements",
        "divide the spread gradient by N, the number of elements each mean averages",
        vjps={("mean", 0): lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims)},
    ),
    Fault(
        "mean.total-size",
        "mean's VJP divides by the input's total size instead of the size of the reduced axes",
        "divide by the product of the reduced axes' sizes, not x.size",
        vjps={("mean", 0): lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims) / x.size},
    ),
    Fault(
        "sum.no-expand",
        "sum's VJP broadcasts the gradient without first re-inserting the reduced axes",
        "expand_dims the gradient at the reduced axes (or reduce with keepdims=True) "
        "before broadcasting it to the input's shape",
        vjps={("sum", 0): lambda g, ans, x, axis, keepdims: np.broadcast_to(g, x.shape)},
    ),
    Fault(
        "max.all-ties",
        "max/min's VJP gives the whole gradient to every element that ties for the extremum; "
        "TensorFlow splits it equally among them",
        "divide the gradient by the number of tied elements",
        vjps={("max", 0): _all_ties, ("min", 0): _all_ties},
    ),
    Fault(
        "softmax.diagonal",
        "softmax's VJP uses only the Jacobian's diagonal s * (1 - s), ignoring the "
        "cross terms -s_i * s_j",
        "use s * (g - sum(g * s, axis, keepdims=True))",
        vjps={("softmax", 0): lambda g, ans, x, axis: g * ans * (1 - ans)},
    ),
    Fault(
        "log_softmax.no-softmax",
        "log_softmax's VJP subtracts sum(g) without weighting it by softmax(x)",
        "use g - softmax(x) * sum(g, axis, keepdims=True)",
        vjps={("log_softmax", 0): lambda g, ans, x, axis: g - np.sum(g, axis=axis, keepdims=True)},
    ),
    Fault(
        "transpose.perm-not-inverted",
        "transpose's VJP applies perm again instead of its inverse",
        "transpose the gradient by argsort(perm), the inverse permutation",
        vjps={
            ("transpose", 0): lambda g, ans, x, perm: np.transpose(
                g, None if perm is None else perm
            )
        },
    ),
    Fault(
        "backprop.no-accumulate",
        "the backward pass overwrites a gradient where a value fans out to several "
        "consumers, instead of adding the contributions",
        "accumulate: grad[x] = grad[x] + contribution for every consumer of x",
        driver="no-accumulate",
    ),
    Fault(
        "backprop.traversal-order",
        "the backward pass visits nodes in queue (breadth-first) order, so a node can pass "
        "its gradient on before all of its consumers have contributed to it",
        "visit nodes in reverse topological order (each after all its consumers)",
        driver="traversal-order",
    ),
    Fault(
        "backprop.no-upstream",
        "the VJPs receive ones instead of the upstream gradient: the chain rule is not applied",
        "multiply each local derivative by the gradient flowing in from the output",
        driver="no-upstream",
    ),
)

FAULTS: dict[str, Fault] = {f.name: f for f in CATALOGUE}


class FaultyEngine(BuiltinEngine):
    """The builtin engine with exactly one fault switched on."""

    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.name = f"builtin+{fault.name}"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        return self.fault.vjps.get((op.name, i)) or super().vjp_rule(op, i)

    def reduce_to_shape(self, op: Op, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        if self.fault.reduce is not None and op.name in self.fault.reduce_ops:
            return self.fault.reduce(share, shape)
        return super().reduce_to_shape(op, share, shape)

    def vjp(self, tensor: Tensor, i: int, g: np.ndarray) -> np.ndarray:
        if self.fault.driver == "no-upstream":
            g = np.ones_like(g)
        return super().vjp(tensor, i, g)

    def backward(self, output: Tensor, cotangent: np.ndarray) -> dict[Tensor, Any]:
        if self.fault.driver == "traversal-order":
            return _traversal_order_backward(self, output, cotangent)
        return super().backward(output, cotangent)

    def accumulate(self, grads: dict[Tensor, np.ndarray], arg: Tensor, share: np.ndarray) -> None:
        if self.fault.driver == "no-accumulate":
            grads[arg] = share
        else:
            super().accumulate(grads, arg, share)


def relevant_faults(op_names: set[str], *, driver: bool = True) -> list[Fault]:
    """Faults worth trying on an expression using `op_names` (driver faults when asked)."""
    return [f for f in CATALOGUE if (f.driver is not None and driver) or (f.ops & op_names)]


def _check_catalogue() -> None:
    for fault in CATALOGUE:
        for op_name, i in fault.vjps:
            op = get_op(op_name)  # a typo in an op name fails at import, not at diagnosis time
            if i >= max(1, len(op.params)):
                raise ValueError(f"fault {fault.name}: {op_name} has no argument {i}")


_check_catalogue()
