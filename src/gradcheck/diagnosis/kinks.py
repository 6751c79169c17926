"""Where a non-smooth op sits at a kink or a tie, and TensorFlow's convention there."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..expression import Node
from ..ops import unbroadcast

CONVENTIONS = {
    "relu": "TensorFlow takes relu'(0) = 0",
    "abs": "TensorFlow takes abs'(0) = 0 (sign(0))",
    "maximum": "at a tie TensorFlow gives the whole gradient to the first argument",
    "minimum": "at a tie TensorFlow gives the whole gradient to the first argument",
    "max": "TensorFlow splits the gradient equally among the tied maxima",
    "min": "TensorFlow splits the gradient equally among the tied minima",
}


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
    if len(op.params) == 2:  # maximum / minimum: a tie between the two arguments
        a, b = (inputs.get("a0"), inputs.get("a1"))
        a = np.asarray(node.args[0].literal) if a is None else a
        b = np.asarray(node.args[1].literal) if b is None else b
        return unbroadcast(np.asarray(a == b, dtype=np.int64), x.shape) > 0
    # max / min reductions: elements tied for the extremum
    reduce = np.max if op.name == "max" else np.min
    axis = node.attrs.get("axis")
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    best = reduce(x, axis=np_axis, keepdims=True)
    winners = x == best
    return winners & (winners.sum(axis=np_axis, keepdims=True) > 1)
