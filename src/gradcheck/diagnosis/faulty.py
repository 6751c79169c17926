"""`FaultyEngine`: the builtin engine with one catalogue fault switched on.

It overrides the builtin engine's seams (`vjp_rule`, `reduce_to_shape`, `vjp`,
`accumulate`, `backward`) for its fault only; the correct code path in
`engines/builtin.py` never branches on a fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..engines.builtin import BuiltinEngine, Tensor
from ..ops import Op
from ..ops.registry import VJP
from .faults import Fault


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
