"""What a fuzz run exercised, op by op, so that a clean run says what it means.

Read off each checked case's expression, not off the generator's intentions: how each
op node's arguments met its output (broadcast kinds: the same shape, size-1 axes, fewer
leading axes, a scalar, a literal constant; for ops over the last two axes, batch axes
and how they broadcast), which reduction axes (none given, one, several, negative) and
keepdims, permutations and indexes, values used more than once, integer inputs (an
op's indices) and whether an index repeats in them; and ops checked at their kinks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..cases.model import Case
from ..expression import Node
from ..ops import broadcast_shapes

# The order features are listed in.
FEATURES = (
    "same", "size-1", "leading", "scalar", "constant",
    "batch", "batch one side", "batch size-1",
    "axis=None", "one axis", "several axes", "negative axis", "keepdims",
    "perm", "index", "reuse", "at kinks", "indices", "repeated index", "one of outputs",
    "whole numbers",
)  # fmt: skip


@dataclass
class OpCoverage:
    examples: int = 0  # checked examples that use the op
    features: Counter[str] = field(default_factory=Counter)  # op nodes showing each feature


@dataclass
class Coverage:
    examples: int = 0
    dtypes: Counter[str] = field(default_factory=Counter)
    ops: dict[str, OpCoverage] = field(default_factory=dict)

    def add(self, case: Case, kinks: bool = False) -> None:
        """Count one checked case; `kinks`: its inputs were drawn as small integers."""
        self.examples += 1
        self.dtypes[case.dtype] += 1
        uses = Counter(arg for node in case.expression.op_nodes for arg in node.args)
        seen: set[str] = set()
        for node in case.expression.op_nodes:
            assert node.op is not None
            entry = self.ops.setdefault(node.op.name, OpCoverage())
            if node.op.name not in seen:
                seen.add(node.op.name)
                entry.examples += 1
            found = features(node, uses) | _index_features(node, case)
            if kinks and node.op.kink:
                found.add("at kinks")
            if kinks and node.op.zeros:  # prod: whole numbers, zeros among them
                found.add("whole numbers")
            entry.features.update(found)

    def to_dict(self) -> dict:
        return {
            "examples": self.examples,
            "dtypes": dict(self.dtypes),
            "ops": {
                name: {"examples": entry.examples, "features": ordered(entry.features)}
                for name, entry in sorted(self.ops.items())
            },
        }


def ordered(features: Counter[str]) -> dict[str, int]:
    return {name: features[name] for name in FEATURES if features[name]}


def features(node: Node, uses: Counter[Node]) -> set[str]:
    """What one op node exercises; `uses` counts each node's consumers in the expression."""
    op, out = node.op, node.shape
    assert op is not None
    args = [a for a in node.args if not a.integer]  # indices meet no output's shape
    found: set[str] = set()
    if len(args) > 1 and not op.variadic:
        if op.shape is broadcast_shapes:  # an elementwise op
            for arg in args:
                found |= _meets(arg, out)
        elif len(out) >= 2 and out[:-2]:  # an op over the last two axes, with batch axes
            found.add("batch")
            for arg in args:
                kinds = _meets(arg, out, batch=True)
                if "leading" in kinds or "scalar" in kinds:
                    found.add("batch one side")
                if "size-1" in kinds:
                    found.add("batch size-1")
    found |= _attribute_features(node)
    if node.is_multi:  # split: one of its outputs taken, by index
        found.add("one of outputs")
    if any(uses[arg] > 1 for arg in args if not arg.is_literal):
        found.add("reuse")
    return found


def _index_features(node: Node, case: Case) -> set[str]:
    """An op's integer inputs (take's indices), and whether an index repeats in them."""
    op = node.op
    assert op is not None
    found: set[str] = set()
    for param, arg in zip(op.params, node.args, strict=False):
        if param in op.integer and arg.name in case.inputs:
            values = case.inputs[arg.name].ravel()  # the case's arrays, drawn
            found.add("indices")
            if len(set(values.tolist())) < values.size:
                found.add("repeated index")
    return found


def _meets(arg: Node, out: tuple[int, ...], *, batch: bool = False) -> set[str]:
    """How an argument's shape met the output's (only their batch axes when `batch`)."""
    if arg.is_literal:
        return {"constant"}
    shape, target = (arg.shape[:-2], out[:-2]) if batch else (arg.shape, out)
    if shape == target:
        return {"same"}
    if not shape:
        return {"scalar"}
    if len(shape) > len(target):  # not broadcast into the output: a gather's table
        return set()
    found = {"leading"} if len(shape) < len(target) else set()
    aligned = target[len(target) - len(shape) :]
    if any(a == 1 and t > 1 for a, t in zip(shape, aligned, strict=True)):
        found.add("size-1")
    return found


def _attribute_features(node: Node) -> set[str]:
    found: set[str] = set()
    attrs = node.attrs
    if "axis" in attrs and "keepdims" in attrs:  # a reduction
        axis = attrs["axis"]
        if axis is None:
            found.add("axis=None")
        else:
            axes = axis if isinstance(axis, list) else [axis]
            found.add("several axes" if len(axes) > 1 else "one axis")
            if any(a < 0 for a in axes):
                found.add("negative axis")
        if attrs["keepdims"]:
            found.add("keepdims")
    elif isinstance(attrs.get("axis"), int) and attrs["axis"] < 0:
        found.add("negative axis")
    if attrs.get("perm") is not None:
        found.add("perm")
    if attrs.get("index"):
        found.add("index")
    return found
