"""Where a non-smooth op sits at a kink or a tie: the elements a convention decides."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...expression import Node
from ...ops import unbroadcast
from ...ops.pooling import window_ties


def kink_mask(node: Node, arg: int, inputs: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Elements of argument `arg` that sit at `node`'s kink or tie; None for a smooth op."""
    op = node.op
    if op is None or op.kink is None:
        return None
    x = inputs.get(f"a{arg}")
    if x is None:
        return None
    if op.kink == "zero":
        return x == 0
    if op.kink == "bound":  # clip at lo or hi
        return (x == node.attrs["lo"]) | (x == node.attrs["hi"])
    if op.kink == "base":  # pow: the exponent's gradient where the base is not positive
        if arg != 1:
            return None
        return _on(_value(node, inputs, 0) <= 0, x.shape)
    if op.kink == "window":  # a max-pool: elements tied for some window's maximum
        return window_ties(x, rank=x.ndim - 2, **node.attrs)
    if len(op.params) == 2:  # maximum / minimum: a tie between the two arguments
        return _on(_value(node, inputs, 0) == _value(node, inputs, 1), x.shape)
    # max / min reductions: elements tied for the extremum
    reduce = np.max if op.name == "max" else np.min
    axis = node.attrs.get("axis")
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    best = reduce(x, axis=np_axis, keepdims=True)
    winners = x == best
    return winners & (winners.sum(axis=np_axis, keepdims=True) > 1)


def _value(node: Node, inputs: Mapping[str, np.ndarray], i: int) -> np.ndarray:
    value = inputs.get(f"a{i}")
    return np.asarray(node.args[i].literal) if value is None else value


def _on(mask: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A mask in the broadcast shape, on an argument of `shape`: any element it touches."""
    return unbroadcast(np.asarray(mask, dtype=np.int64), shape) > 0
