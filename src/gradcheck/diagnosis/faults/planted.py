"""Fault fingerprints: the builtin engine with one catalogue fault switched on.

`FaultyEngine` overrides the builtin engine's seams (`vjp_rule`, `reduce_to_shape`,
`vjp`, `accumulate`, `backward`, and in forward mode `jvp_rule`, `broadcast_tangent`) for
its fault only; the correct code path in
`engines/builtin.py` never branches on a fault. When an engine fails a case, the
faults relevant to it (`relevant_faults`) are run, and every one that reproduces the
engine's numbers becomes a `fault:<name>` hint (`fault_hint`) of confidence `exact`.
The catalogue itself is `catalogue/`, one module per op family.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...cases.model import Case
from ...engines.builtin.engine import BuiltinEngine, Tensor
from ...expression import Node
from ...ops import Op, get_op
from ...ops.registry import JVP, VJP
from ...results import Hint
from .. import idiom
from .catalogue import CATALOGUE, FAULTS, Fault

__all__ = ["CATALOGUE", "FAULTS", "Fault", "FaultyEngine", "fault_hint", "relevant_faults"]


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
            if not any(queued is arg for queued in working):  # Tensors' `==` is elementwise
                working.append(arg)
    return grads


class FaultyEngine(BuiltinEngine):
    """The builtin engine with exactly one fault switched on (and, to compare with an
    engine that declares them, its subgradient conventions)."""

    def __init__(self, fault: Fault, conventions: Mapping[str, str] | None = None) -> None:
        super().__init__(conventions)
        self.fault = fault
        self.name = f"builtin+{fault.name}"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        # A variadic op has one rule for every element of its list: keyed (op, 0).
        key = (op.name, 0 if op.variadic else i)
        return self.fault.vjps.get(key) or super().vjp_rule(op, i)

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

    def jvp_rule(self, op: Op, i: int) -> JVP:
        key = (op.name, 0 if op.variadic else i)
        return self.fault.jvps.get(key) or super().jvp_rule(op, i)

    def broadcast_tangent(self, op: Op, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        if op.name in self.fault.unbroadcast_tangent:
            return share
        return super().broadcast_tangent(op, share, shape)


def fault_hint(fault: Fault, case: Case, spell: str, message: str | None = None) -> Hint:
    """The `fault:<name>` hint for a fault that reproduces the engine on `case`; the fix
    gets the right rules in the engine's spelling (TensorFlow, PyTorch, JAX) too."""
    op = fault.name.split(".")[0]
    # a fault of two ops (max and min) names the one the case uses; a shared step's none
    used = {n.op.name for n in case.expression.op_nodes if n.op is not None} & fault.ops
    if op in fault.ops and op not in used and used:
        op = min(used)
    nodes = [n.text for n in case.expression.op_nodes if n.op is not None and n.op.name == op]
    summary = fault.summary
    if fault.at_op:  # a shared unbroadcast step: name the op it struck at
        struck = [n for n in case.expression.op_nodes if _broadcasts(n, fault.reduce_ops)]
        op = struck[0].op.name if struck else op  # type: ignore[union-attr]
        nodes = [n.text for n in struck if n.op is struck[0].op]
        axes = "batch axes" if op == "matmul" else "axes"
        summary = f"{fault.at_op.format(op=op, axes=axes)}: {summary}" if struck else summary
    fix = fault.fix
    if spell in idiom.SPELLINGS:
        rules = [_spelled_rule(op_name, arg, spell) for op_name, arg in fault.vjps]
        fix += (
            f"; in {idiom.SPELLINGS[spell]}: " + ", ".join(r for r in rules if r)
            if any(rules)
            else ""
        )
    return Hint(
        fault.code,
        message
        or f"{summary}; the builtin engine with this one fault reproduces the engine's numbers",
        fix,
        "exact",
        op=op if op in fault.ops else None,
        node=nodes[0] if len(nodes) == 1 else None,
    )


def _broadcasts(node: Node, ops: frozenset[str]) -> bool:
    """Whether `node`, of one of `ops`, broadcast an argument (matmul: its batch axes), so
    its gradient must be summed back."""
    if node.op is None or node.op.name not in ops:
        return False
    matrix = 2 if node.op.name == "matmul" else 0

    def outer(shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[: max(len(shape) - matrix, 0)])

    return any(outer(arg.shape) != outer(node.shape) for arg in node.args)


def _spelled_rule(op_name: str, arg: int, spell: str) -> str | None:
    op = get_op(op_name)
    text = op.rule(arg, spell)
    return f"{op.name}'s VJP for {idiom.param(op, arg)} is `{text}`" if text else None


def relevant_faults(op_names: set[str], *, driver: bool = True, check: str = "vjp") -> list[Fault]:
    """Faults of `check`'s rules worth trying on an expression using `op_names` (driver
    faults when asked)."""
    return [
        f
        for f in CATALOGUE
        if f.check == check and ((f.driver is not None and driver) or (f.ops & op_names))
    ]
