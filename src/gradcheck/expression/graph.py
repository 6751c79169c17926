"""The parsed form of an expression: a list of nodes in topological order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..ops import Op, Shape

if TYPE_CHECKING:
    from ..results import GraphNode


@dataclass(eq=False)
class Node:
    """One value of the expression: an input, a numeric literal or an op applied to nodes.

    An op with several outputs (`Op.multi`: split, unstack, slogdet) is one node whose
    `outputs` hold its outputs' shapes (its own `shape` is ``()``); each output the
    expression uses is a *part*: a node without an op whose one argument is that node and
    whose `part` says which output it is. Only parts are values: no op takes the
    several-output node itself, nor is it the output or a `wrt` node.

    Nodes compare by identity, so they can key dictionaries of values and gradients.
    """

    index: int
    text: str
    shape: Shape
    op: Op | None = None
    args: tuple[Node, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str | None = None  # the input's name, or the binding that names this node
    literal: float | None = None  # the value of a numeric literal
    integer: str | None = None  # an integer input's dtype (int32, int64): never differentiated
    line: int = 1  # line within the expression's source
    outputs: tuple[Shape, ...] | None = None  # an op with several outputs: their shapes
    part: int | None = None  # which output of its argument (an op with several) it is

    @property
    def is_input(self) -> bool:
        return self.op is None and self.literal is None and self.part is None

    @property
    def is_multi(self) -> bool:
        """An op with several outputs: only its parts are values."""
        return self.outputs is not None

    @property
    def is_part(self) -> bool:
        return self.part is not None

    def unindexed(self) -> str:
        """What is wrong with using an op with several outputs as one value."""
        count = len(self.outputs or ())
        ref = self.name or self.text
        last = f" to {ref}[{count - 1}]" if count > 1 else ""
        named = f" ({self.text})" if self.name else ""
        return (
            f"{ref}{named} returns {count} values (an op with several outputs); index the "
            f"one to use: {ref}[0]{last}"
        )

    @property
    def made_by(self) -> Op | None:
        """The op that computes the node's value: its own, or for a part its argument's."""
        if self.op is None and self.part is not None:
            return self.args[0].op
        return self.op

    def output_view(self, part: Node) -> Node:
        """This op with several outputs seen as the one output `part` (one of its parts):
        what localisation checks alone, a node per output. It has the op, arguments and
        attributes of this node and the text and shape of the part, and both `outputs` and
        `part` set; it is in no expression's graph."""
        assert self.outputs is not None and part.part is not None and part.args[0] is self
        return Node(
            part.index, part.text, part.shape, self.op, self.args, dict(self.attrs),
            line=self.line, outputs=self.outputs, part=part.part,
        )  # fmt: skip

    @property
    def is_literal(self) -> bool:
        return self.literal is not None

    def __repr__(self) -> str:
        return f"Node({self.index}: {self.text} {self.shape})"


@dataclass
class Expression:
    source: str
    nodes: list[Node]  # every node after its arguments
    output: Node
    inputs: dict[str, Node]
    bindings: dict[str, Node]

    @property
    def op_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.op is not None]

    def lookup(self, name: str) -> Node:
        """An input or a binding by name: what `wrt` may name."""
        if name in self.bindings:
            return self.bindings[name]
        return self.inputs[name]

    @property
    def integer_inputs(self) -> dict[str, str]:
        """The integer inputs (indices, labels, ids) by name, with their dtypes."""
        return {name: node.integer for name, node in self.inputs.items() if node.integer}

    @property
    def names(self) -> list[str]:
        return [*self.inputs, *(b for b in self.bindings if b not in self.inputs)]

    def outline(self) -> list[GraphNode]:
        """The nodes the output depends on, as plain data (no ops, no functions), for a
        report to draw; arguments come first, so the output is the last."""
        from ..results import GraphNode  # a report's: reading a case needs none of them

        needed = {self.output}
        for node in reversed(self.nodes):
            if node in needed:
                needed.update(node.args)
        kept = [node for node in self.nodes if node in needed]
        position = {node: i for i, node in enumerate(kept)}
        return [
            GraphNode(
                node.text,
                _op_label(node),
                [position[arg] for arg in node.args],
                tuple(node.shape),
                node.name,
                len(node.outputs) if node.outputs is not None else None,
            )
            for node in kept
        ]


def _op_label(node: Node) -> str | None:
    """What a report calls the node's op: its name, for a part with its position (split[1])."""
    made_by = node.made_by
    if made_by is None:
        return None
    return f"{made_by.name}[{node.part}]" if node.part is not None else made_by.name
