"""Say where a mask of elements lies in terms of a node's inputs: `a <= 0`, `exp(x) overflows`.

A NaN region (or a region where a VJP is zero) is described by the first candidate
predicate over the node's arguments (or its output) that selects exactly those
elements. Predicates over another argument count on an argument's gradient through
broadcasting: an element of `b` is in the region if any element it meets there is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from ...expression import Node
from ...ops import unbroadcast
from ...ops.broadcast import sums_back

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


# Probe values for one argument at a time (the others held at 1): below and above 0, and
# out where exp overflows but does not yet underflow (and beyond), in each float dtype:
# exp(720) is inf in float64 while exp(-720) is not yet 0; 95 and 14 do the same for
# float32/bfloat16 and float16.
_FAR = (14.0, 95.0, 720.0, 1000.0)
GRID = (*(-v for v in reversed(_FAR)), -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, *_FAR)

Selector = Callable[[Mapping[str, np.ndarray], np.ndarray | None], np.ndarray]
# Runs the node on other inputs: the mask to describe there, and the node's output.
Probe = Callable[[dict[str, np.ndarray]], "tuple[np.ndarray, np.ndarray] | None"]


def describe(
    mask: np.ndarray,
    node: Node,
    inputs: Mapping[str, np.ndarray],
    output: np.ndarray | None = None,
    probe: Probe | None = None,
) -> str:
    """Where `mask` (over one argument's elements) is true, as a predicate if one fits.

    When several predicates select the same elements of the case's own inputs, `probe`
    runs the node on a grid of values, one argument at a time, to tell them apart."""
    with np.errstate(all="ignore"):
        candidates = _candidates(node, inputs, with_output=output is not None)
        fitting = [(t, f) for t, f in candidates if _fits(f(inputs, output), mask)]
        if len(fitting) > 1 and probe is not None:
            fitting = _on_grid(fitting, inputs, probe) or fitting
    return fitting[0][0] if fitting else _example(mask, node, inputs)


def _fits(selected: np.ndarray, mask: np.ndarray) -> bool:
    if selected.shape != mask.shape and not sums_back(selected.shape, mask.shape):
        return False
    return np.array_equal(_on(selected, mask.shape), mask)


def _on_grid(
    fitting: list[tuple[str, Selector]], inputs: Mapping[str, np.ndarray], probe: Probe
) -> list[tuple[str, Selector]]:
    for varied in inputs:
        dtype = inputs[varied].dtype
        values = {n: np.ones(len(GRID), dtype) for n in inputs}
        values[varied] = np.array(GRID, dtype)
        probed = probe(values)
        if probed is not None:
            mask, output = probed
            fitting = [(t, f) for t, f in fitting if _fits(f(values, output), mask)]
    return fitting


def _candidates(
    node: Node, inputs: Mapping[str, np.ndarray], *, with_output: bool
) -> Iterator[tuple[str, Selector]]:
    values = [(f"a{i}", arg) for i, arg in enumerate(node.args) if f"a{i}" in inputs]
    for name, arg in values:
        for template, predicate in _ON_ONE:
            yield template.format(_operand(arg.text)), _on_input(name, predicate)
    if len(values) == 2:
        (a, a_node), (b, b_node) = values
        yield f"{_operand(a_node.text)} == {_operand(b_node.text)}", lambda v, y: v[a] == v[b]
    if with_output:
        yield f"{_operand(node.text)} == 0", lambda v, y: y == 0
        yield f"{_operand(node.text)} overflows", lambda v, y: np.isinf(y)


def _on_input(name: str, predicate: Predicate) -> Selector:
    return lambda values, output: predicate(values[name])


def _operand(text: str) -> str:
    """`x`, `h[0]` and `exp(x)` as they are; `x - 1` in parentheses."""
    atomic = re.fullmatch(r"[\w.]+(\[[^\]]*\])*", text) is not None
    return text if atomic or _is_call(text) else f"({text})"


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
