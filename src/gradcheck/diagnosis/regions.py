"""Say where a mask of elements lies in terms of a node's inputs: `a <= 0`, `exp(x) overflows`.

A NaN region (or a region where a VJP is zero) is described by the first candidate
predicate over the node's arguments (or its output) that selects exactly those
elements. Predicates over another argument count on an argument's gradient through
broadcasting: an element of `b` is in the region if any element it meets there is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import numpy as np

from ..expression import Node
from ..ops import unbroadcast
from ..ops.broadcast import sums_back

Predicate = Callable[[np.ndarray], np.ndarray]

# In order of preference when several select the same elements.
_ON_ONE: tuple[tuple[str, Predicate], ...] = (
    ("{} == 0", lambda v: v == 0),
    ("{} < 0", lambda v: v < 0),
    ("{} <= 0", lambda v: v <= 0),
    ("{} > 0", lambda v: v > 0),
    ("{} >= 0", lambda v: v >= 0),
    ("exp({}) overflows", lambda v: np.isinf(np.exp(v)) & np.isfinite(v)),
    ("exp({}) underflows", lambda v: np.exp(v) == 0),
    ("exp(-{}) overflows", lambda v: np.isinf(np.exp(-v)) & np.isfinite(v)),
    ("exp(-{}) underflows", lambda v: np.exp(-v) == 0),
)


def describe(
    mask: np.ndarray,
    node: Node,
    inputs: Mapping[str, np.ndarray],
    output: np.ndarray | None = None,
) -> str:
    """Where `mask` (over one argument's elements) is true, as a predicate if one fits."""
    with np.errstate(all="ignore"):
        for text, selected in _candidates(node, inputs, output):
            fits = selected.shape == mask.shape or sums_back(selected.shape, mask.shape)
            if fits and np.array_equal(_on(selected, mask.shape), mask):
                return text
    return _example(mask, node, inputs)


def _candidates(
    node: Node, inputs: Mapping[str, np.ndarray], output: np.ndarray | None
) -> Iterator[tuple[str, np.ndarray]]:
    values = [(f"a{i}", arg) for i, arg in enumerate(node.args) if f"a{i}" in inputs]
    for name, arg in values:
        for template, predicate in _ON_ONE:
            yield template.format(_operand(arg.text)), predicate(inputs[name])
    if len(values) == 2:
        (a, a_node), (b, b_node) = values
        yield f"{_operand(a_node.text)} == {_operand(b_node.text)}", inputs[a] == inputs[b]
    if output is not None:
        yield f"{_operand(node.text)} == 0", output == 0
        yield f"{_operand(node.text)} overflows", np.isinf(output)


def _operand(text: str) -> str:
    """`x`, `h[0]` and `exp(x)` as they are; `x - 1` in parentheses."""
    return (
        text if text.replace("_", "").replace(".", "").isalnum() or _is_call(text) else f"({text})"
    )


def _is_call(text: str) -> bool:
    """`f(...)` as a whole: the first parenthesis closes at the end of the text."""
    if not text.endswith(")") or "(" not in text or not text[: text.index("(")].isidentifier():
        return False
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char == ")":
            return i == len(text) - 1
    return False


def _on(selected: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if selected.shape == shape:
        return selected
    return unbroadcast(selected.astype(np.int64), shape) > 0


def _example(mask: np.ndarray, node: Node, inputs: Mapping[str, np.ndarray]) -> str:
    """No predicate fits: how many elements, and the arguments' values at the first one."""
    count = int(np.count_nonzero(mask))
    where = np.argwhere(mask)
    if not len(where):
        return "nowhere"
    index = tuple(int(i) for i in where[0])
    values = []
    for i, arg in enumerate(node.args):
        value = inputs.get(f"a{i}")
        if value is not None and value.shape == mask.shape:
            values.append(f"{arg.text} = {float(value[index]):.4g}")
    at = f" (first at {index}" + (", where " + ", ".join(values) if values else "") + ")"
    return f"{count} of {mask.size} elements{at}"
