"""The builtin engine: autodiff on NumPy over the op registry, in reverse and forward mode.

The forward pass records a `Tensor` per op application. The backward pass visits the
tensors in reverse topological order (found iteratively, so depth is no limit), asks
each op's VJP for each argument's share of the gradient, sums it back to the
argument's shape with `unbroadcast`, and accumulates shares where a value fans out.
Every value and every share is rounded to the case's dtype, op by op, as TensorFlow
rounds. For float16/bfloat16 each op is computed in float32 and rounded once, as
TensorFlow's kernels do, rather than rounded after every NumPy step of its formula.

``grad(..., create_graph=True)`` runs the same backward pass with Tensors for the
gradients: each VJP rule then records its NumPy calls as ops (`engines/tensor.py`), so
the gradients it returns are Tensors the engine can differentiate again
(``higher_order = True``). `jvp` is forward mode: the tangents of `wrt` carried through
the recorded graph in topological order by each op's JVP, broadcast to the output's
shape once per op.

`vjp_rule`, `reduce_to_shape`, `vjp`, `accumulate`, `backward`, `jvp_rule` and
`broadcast_tangent` are the seams the fault catalogue overrides in subclasses; the
correct path below never branches on a fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from ...ops import Op, unbroadcast
from ...ops.conventions import convention_rules
from ...ops.registry import JVP, VJP
from ..protocol import with_op_methods
from .tensor import PART, Tensor, apply, working

__all__ = ["BuiltinEngine", "Tensor", "topological_order"]


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


def _applied(rule: VJP | JVP, tensor: Tensor, i: int, direction: Any, ans: Any, args: list) -> Any:
    """A VJP's or JVP's `rule` for argument `i` of `tensor`, on `direction` (a cotangent or
    a tangent), the output `ans` and the arguments `args` (arrays, or Tensors)."""
    assert tensor.op is not None
    with np.errstate(all="ignore"):  # inf and nan are results to compare, not warnings
        if tensor.op.variadic:
            return rule(direction, ans, args, i, **tensor.attrs)
        return rule(direction, ans, *args, **tensor.attrs)


def _working(value: Any) -> Any:
    """`working`, for each output of an op with several too."""
    return tuple(map(working, value)) if isinstance(value, tuple) else working(value)


def _dtype(g: Any) -> np.dtype:
    """A cotangent's dtype: the first output's, for an op with several."""
    return (g[0] if isinstance(g, tuple) else g).dtype


def _total(shares: list[Any]) -> Any:
    """The sum of each argument's share of a tangent (for an op with several outputs,
    output by output)."""
    if isinstance(shares[0], tuple):
        return tuple(_total(list(parts)) for parts in zip(*shares, strict=True))
    return sum(shares[1:], start=shares[0])


@with_op_methods
class BuiltinEngine:
    """`conventions` (SPEC §4): subgradients to take at kinks and ties instead of
    TensorFlow's, e.g. {"maximum": "split"} (ops/conventions.py has the choices)."""

    name = "builtin"
    higher_order = True  # grad(..., create_graph=True) returns Tensors
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
        return apply(op, args, attrs)

    # -- backward -------------------------------------------------------------------------
    def grad(
        self, output: Tensor, wrt: Sequence[Tensor], cotangent: Any, create_graph: bool = False
    ) -> list[Any]:
        """The gradients of ``sum(output * cotangent)``: arrays, or with `create_graph`
        Tensors, recorded as ops, that can be differentiated again."""
        seed = np.asarray(cotangent, dtype=output.value.dtype)
        if create_graph:
            grads = self.backward(output, Tensor(seed))  # type: ignore[arg-type]
            return [grads[t] if t in grads else Tensor(np.zeros_like(t.value)) for t in wrt]
        grads = self.backward(output, seed)
        return [grads.get(t, np.zeros_like(t.value)) for t in wrt]

    def backward(self, output: Tensor, cotangent: np.ndarray) -> dict[Tensor, np.ndarray]:
        grads = {output: cotangent}
        for tensor in reversed(self.topological_order(output)):
            g = grads.get(tensor)
            if g is None or tensor.op is None:
                continue
            if tensor.op is PART:  # an output of an op with several: its cotangent's slot
                (made,) = tensor.args
                slots = grads.setdefault(made, [None] * len(made.value))  # type: ignore[arg-type]
                slots[tensor.attrs["index"]] = g  # type: ignore[index]
                continue
            if tensor.op.multi:
                g = self.cotangents(tensor, g)  # type: ignore[arg-type]
            for i, arg in enumerate(tensor.args):
                if not arg.requires_grad:
                    continue
                share = self.reduce_to_shape(tensor.op, self.vjp(tensor, i, g), arg.value.shape)
                self.accumulate(grads, arg, share)
        return grads

    def cotangents(self, tensor: Tensor, slots: list[Any]) -> tuple[Any, ...]:
        """An op with several outputs: one cotangent per output, zeros for an output
        nothing downstream used (it contributes nothing to the gradient)."""
        return tuple(
            np.zeros_like(value) if g is None else g
            for g, value in zip(slots, tensor.value, strict=True)
        )

    def vjp(self, tensor: Tensor, i: int, g: Any) -> np.ndarray:
        op = tensor.op
        assert op is not None
        rule = self.vjp_rule(op, i)
        several = isinstance(g, tuple)  # an op with several outputs: a cotangent each
        dtype = _dtype(g)
        if isinstance(g, Tensor) or (several and any(isinstance(c, Tensor) for c in g)):
            # create_graph: the rule runs on Tensors, recording ops. Integer arguments
            # (indices) as their arrays: constants, never graph nodes.
            args = [a.value if a.value.dtype.kind in "iu" else a for a in tensor.args]
            ans = tuple(map(Tensor, tensor.value)) if several else tensor
            try:
                share = _applied(rule, tensor, i, g, ans, args)
            except TypeError as e:  # a user op's rule calls NumPy beyond the registry's ops
                raise NotImplementedError(
                    f"{op.name}'s VJP cannot be differentiated again by the builtin engine: {e}"
                ) from e
            return share if isinstance(share, Tensor) else Tensor(np.asarray(share, dtype))
        values = [working(a.value) for a in tensor.args]
        share = _applied(rule, tensor, i, _working(g), _working(tensor.value), values)
        return np.asarray(share).astype(dtype, copy=False)

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

    # -- forward mode -------------------------------------------------------------------
    def jvp(self, output: Tensor, wrt: Sequence[Tensor], tangents: Sequence[Any]) -> np.ndarray:
        """The output's tangent when each node of `wrt` moves along its tangent."""
        known = {t: np.asarray(v, t.value.dtype) for t, v in zip(wrt, tangents, strict=True)}
        for tensor in self.topological_order(output):
            if tensor in known or tensor.op is None:
                continue
            if tensor.op is PART:  # an output of an op with several: its share of the tangents
                if tensor.args[0] in known:
                    known[tensor] = known[tensor.args[0]][tensor.attrs["index"]]
                continue
            shares = [
                self.tangent(tensor, i, known[arg])
                for i, arg in enumerate(tensor.args)
                if arg in known
            ]
            if shares:
                known[tensor] = _total(shares)
        return known.get(output, np.zeros_like(output.value))

    def tangent(self, tensor: Tensor, i: int, t: np.ndarray) -> np.ndarray:
        """Argument `i`'s share of `tensor`'s tangent, in `tensor`'s shape and dtype."""
        op = tensor.op
        assert op is not None
        values = [working(a.value) for a in tensor.args]
        share = _applied(
            self.jvp_rule(op, i), tensor, i, working(t), _working(tensor.value), values
        )
        if op.multi:  # a tangent per output
            return tuple(  # type: ignore[return-value]
                self.broadcast_tangent(op, np.asarray(s), v.shape).astype(v.dtype, copy=False)
                for s, v in zip(share, tensor.value, strict=True)
            )
        share = self.broadcast_tangent(op, np.asarray(share), tensor.value.shape)
        return share.astype(tensor.value.dtype, copy=False)

    def jvp_rule(self, op: Op, i: int) -> JVP:
        if not op.jvps:  # a user op declared without NumPy JVPs
            raise NotImplementedError(f"{op.name} declares no NumPy JVPs ({op.origin})")
        return op.jvps[0] if op.variadic else op.jvps[i]

    def broadcast_tangent(self, op: Op, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(share, shape)
