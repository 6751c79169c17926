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

    @property
    def is_input(self) -> bool:
        return self.op is None and self.literal is None

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
                node.op.name if node.op else None,
                [position[arg] for arg in node.args],
                tuple(node.shape),
                node.name,
            )
            for node in kept
        ]
