"""The builtin engine: reverse-mode autodiff on NumPy over the op registry.

The forward pass records a `Tensor` per op application. The backward pass visits the
tensors in reverse topological order (found iteratively, so depth is no limit), asks
each op's VJP for each argument's share of the gradient, sums it back to the
argument's shape with `unbroadcast`, and accumulates shares where a value fans out.
Every value and every share is rounded to the case's dtype, op by op, as TensorFlow
rounds. For float16/bfloat16 each op is computed in float32 and rounded once, as
TensorFlow's kernels do, rather than rounded after every NumPy step of its formula.

`vjp_rule`, `reduce_to_shape`, `vjp`, `accumulate` and `backward` are the seams the fault
catalogue overrides in subclasses; the correct path below never branches on a fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from ..ops import Op, unbroadcast
from ..ops.conventions import convention_rules
from ..ops.registry import VJP
from .protocol import with_op_methods


class Tensor:
    """A value and how it was made. Compared by identity, so it can key dicts."""

    __slots__ = ("args", "attrs", "name", "op", "requires_grad", "value")

    def __init__(
        self,
        value: np.ndarray,
        op: Op | None = None,
        args: Sequence[Tensor] = (),
        attrs: dict[str, Any] | None = None,
        requires_grad: bool = False,
        name: str | None = None,
    ) -> None:
        self.value = value
        self.op = op
        self.args = tuple(args)
        self.attrs = attrs or {}
        self.requires_grad = requires_grad
        self.name = name

    def __repr__(self) -> str:
        made_by = self.op.name if self.op else (self.name or "constant")
        return f"Tensor({made_by}, shape={self.value.shape})"


_LOW = ("float16", "bfloat16")


def _working(value: np.ndarray) -> np.ndarray:
    """float16/bfloat16 arrays in float32, to compute an op in; others as they are."""
    return value.astype(np.float32) if value.dtype.name in _LOW else value


def topological_order(output: Tensor) -> list[Tensor]:
    """Every tensor `output` depends on, each after all of its arguments (iterative DFS)."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(output, False)]
    while stack:
        tensor, args_done = stack.pop()
        if args_done:
            order.append(tensor)
            continue
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        stack.append((tensor, True))
        stack.extend((arg, False) for arg in tensor.args if id(arg) not in seen)
    return order


@with_op_methods
class BuiltinEngine:
    """`conventions` (SPEC §4): subgradients to take at kinks and ties instead of
    TensorFlow's, e.g. {"maximum": "split"} (ops/conventions.py has the choices)."""

    name = "builtin"
    # Class-level defaults too: a subclass need not call __init__.
    conventions: Mapping[str, str] = MappingProxyType({})
    _rules: Mapping[tuple[str, int], VJP] = MappingProxyType({})

    def __init__(self, conventions: Mapping[str, str] | None = None) -> None:
        if conventions:
            self.conventions = dict(conventions)
            self._rules = convention_rules(self.conventions)

    def leaf(self, name: str, value: Any) -> Tensor:
        return Tensor(np.array(value), requires_grad=True, name=name)

    def constant(self, value: Any) -> Tensor:
        return Tensor(np.array(value))

    def value(self, node: Tensor) -> np.ndarray:
        return node.value

    def apply(self, op: Op, args: list[Tensor], attrs: dict[str, Any]) -> Tensor:
        dtype = np.result_type(*(a.value for a in args))
        values = [_working(a.value) for a in args]
        requires_grad = any(a.requires_grad for a in args)
        if requires_grad and not op.vjps:  # a user op declared without NumPy VJPs
            raise NotImplementedError(f"{op.name} declares no NumPy VJPs ({op.origin})")
        with np.errstate(all="ignore"):  # inf and nan are results to compare, not warnings
            out = op.forward(values, **attrs) if op.variadic else op.forward(*values, **attrs)
        return Tensor(np.asarray(out).astype(dtype, copy=False), op, args, attrs, requires_grad)

    # -- backward -------------------------------------------------------------------------
    def grad(self, output: Tensor, wrt: Sequence[Tensor], cotangent: Any) -> list[np.ndarray]:
        grads = self.backward(output, np.asarray(cotangent, dtype=output.value.dtype))
        return [grads.get(t, np.zeros_like(t.value)) for t in wrt]

    def backward(self, output: Tensor, cotangent: np.ndarray) -> dict[Tensor, np.ndarray]:
        grads = {output: cotangent}
        for tensor in reversed(self.topological_order(output)):
            g = grads.get(tensor)
            if g is None or tensor.op is None:
                continue
            for i, arg in enumerate(tensor.args):
                if not arg.requires_grad:
                    continue
                share = self.reduce_to_shape(tensor.op, self.vjp(tensor, i, g), arg.value.shape)
                self.accumulate(grads, arg, share)
        return grads

    def vjp(self, tensor: Tensor, i: int, g: np.ndarray) -> np.ndarray:
        op, values = tensor.op, [_working(a.value) for a in tensor.args]
        assert op is not None
        rule = self.vjp_rule(op, i)
        ans, work = _working(tensor.value), _working(g)
        with np.errstate(all="ignore"):
            if op.variadic:
                share = rule(work, ans, values, i, **tensor.attrs)
            else:
                share = rule(work, ans, *values, **tensor.attrs)
        return np.asarray(share).astype(g.dtype, copy=False)

    # -- seams for the fault catalogue -------------------------------------------------------
    def vjp_rule(self, op: Op, i: int) -> VJP:
        return self._rules.get((op.name, i)) or (op.vjps[0] if op.variadic else op.vjps[i])

    def reduce_to_shape(self, op: Op, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return unbroadcast(share, shape)

    def topological_order(self, output: Tensor) -> list[Tensor]:
        return topological_order(output)

    def accumulate(self, grads: dict[Tensor, np.ndarray], arg: Tensor, share: np.ndarray) -> None:
        # Not `+=`: a VJP may hand back `g` itself, and adding in place would then
        # change another tensor's gradient too.
        grads[arg] = share if arg not in grads else grads[arg] + share
