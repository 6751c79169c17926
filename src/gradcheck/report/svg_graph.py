"""A case's expression drawn as a graph: inputs at the top, ops below, the output last.

A node that failed when checked alone, or that a hint names, is drawn dashed in red
with what was found there and the mechanism found (SPEC §6.1); the node the top hint
names (or, for a hint that names only an op, such as a fingerprint, the nodes of that
op) is highlighted. Each state also has a shape of its own (dashes, a heavy border,
text), so the graph reads in grey.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..results import CaseResult, GraphNode
from .graph_layout import layered
from .markup import shape, text

CHAR_PX = {12: 7.3, 10: 6.1}  # monospace advance at the two font sizes used
LINE_PX = 14
PAD = 10
LAYER_GAP = 34
MARK_LENGTH = 40  # characters of a mark shown in the node; the title has it all

# The edges' arrowhead, defined once per page.
GRAPH_DEFS = (
    '<marker id="gc-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="#57606a"/>'
    "</marker>"
)


@dataclass
class NodeMarks:
    """What the graph shows about each node (by position in `CaseResult.graph`)."""

    failing: dict[int, list[str]]  # node -> what was found wrong there
    highlighted: set[int]


def node_marks(case: CaseResult) -> NodeMarks:
    """Failing nodes from localisation and from hints; the top hint's node highlighted."""
    by_text: dict[str, list[int]] = {}
    for i, node in enumerate(case.graph):
        by_text.setdefault(node.text, []).append(i)
    failing: dict[int, list[str]] = {}
    said = [*case.hints, *(h for top in case.hints for h in top.also)]
    mechanisms = {(h.node, h.arg): h.mechanism for h in said if h.code == "op-vjp" and h.mechanism}
    for result in case.nodes:
        if result.status != "failed":
            continue
        for i in by_text.get(result.node, []):
            wrong = [
                _argument(case.graph, i, arg) + _said(mechanisms.get((result.node, arg)))
                for arg in result.args
            ]
            failing.setdefault(i, []).append(
                f"wrong VJP for {' and '.join(wrong)}" if wrong else "wrong VJP"
            )
    for hint in case.hints:
        # op-vjp says what localisation said, already shown above.
        if hint.code != "op-vjp":
            for i in by_text.get(hint.node or "", []):
                failing.setdefault(i, []).append(hint.code + _said(hint.mechanism))
    highlighted: set[int] = set()
    if case.hints:
        top = case.hints[0]
        highlighted = set(by_text.get(top.node or "", []))
        if not highlighted and top.op:
            of_op = {i for i, node in enumerate(case.graph) if node.op == top.op}
            highlighted = (of_op & set(failing)) or of_op
        for i in highlighted:
            failing.setdefault(i, []).append(f"top hint: {top.code}")
    return NodeMarks(failing, highlighted)


def _said(mechanism: str | None) -> str:
    """A mechanism (SPEC §6.1) after the mark it belongs to."""
    return f" ({mechanism})" if mechanism else ""


def _argument(graph: list[GraphNode], node: int, arg: int) -> str:
    """Argument `arg` of `node` by name (its text when it has none); for an output of an op
    with several (split[1]), whose one argument is the op, the op's argument."""
    args = graph[node].args
    if graph[node].op and "[" in graph[node].op and len(args) == 1:  # a part
        args = graph[args[0]].args
    return (graph[args[arg]].name or graph[args[arg]].text) if arg < len(args) else str(arg)


def expression_graph(case: CaseResult) -> str:
    """The case's graph as inline SVG, or "" when there is none (an invalid case)."""
    graph = case.graph
    if not graph:
        return ""
    found = node_marks(case)
    lines = [_lines(node, found.failing.get(i, [])) for i, node in enumerate(graph)]
    widths = [max(len(t) * CHAR_PX[size] for t, size in ls) + 2 * PAD for ls in lines]
    heights = [len(ls) * LINE_PX + PAD for ls in lines]
    layout = layered([node.args for node in graph], widths)
    row_height = [0.0] * layout.layers
    for i, h in enumerate(heights):
        row_height[layout.layer[i]] = max(row_height[layout.layer[i]], h)
    row_top = [sum(row_height[:r]) + r * LAYER_GAP + 2 for r in range(layout.layers)]

    def middle(row: int) -> float:
        return row_top[row] + row_height[row] / 2

    parts = []
    for (argument, consumer), points in zip(layout.edge_ends, layout.edges, strict=True):
        start = (layout.x[argument], middle(layout.layer[argument]) + heights[argument] / 2)
        end = (layout.x[consumer], middle(layout.layer[consumer]) - heights[consumer] / 2 - 2)
        inner = [(x, middle(row)) for x, row in points[1:-1]]
        parts.append(_edge([start, *inner, end]))
    for i, node in enumerate(graph):
        at = (layout.x[i] - widths[i] / 2, middle(layout.layer[i]) - heights[i] / 2)
        states = [
            state
            for state, holds in (
                ("failing", i in found.failing),
                ("highlighted", i in found.highlighted),
                ("output", i == len(graph) - 1),
            )
            if holds
        ]
        wrong = found.failing.get(i, [])
        parts.append(_node(node, at, (widths[i], heights[i]), lines[i], states, wrong))
    width = layout.width + 4
    height = row_top[-1] + row_height[-1] + 4
    return (
        f'<svg class="graph" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="-2 0 {width:.0f} {height:.0f}" role="img">'
        f"<title>the expression as a graph: {text(case.expr)}</title>{''.join(parts)}</svg>"
    )


def _kind(node: GraphNode) -> str:
    if node.op is not None:
        return "op"
    return "input" if node.name == node.text else "literal"  # an input's text is its name


def _lines(node: GraphNode, found: list[str]) -> list[tuple[str, int]]:
    """The node's text lines and their font sizes: what it is, its shape, what is wrong."""
    kind = _kind(node)
    if kind == "literal":
        return [(node.text, 10)]
    head = node.op if kind == "op" else node.text
    lines = [(f"{node.name} = {head}" if kind == "op" and node.name else head, 12)]
    outputs = node.outputs  # an op with several: its parts below show their shapes
    lines.append((shape(node.shape) if outputs is None else f"{outputs} outputs", 10))
    for mark in dict.fromkeys(found):  # once each, in the order found
        lines.append((mark if len(mark) <= MARK_LENGTH else mark[: MARK_LENGTH - 1] + "…", 10))
    return lines


def _node(
    node: GraphNode,
    at: tuple[float, float],
    size: tuple[float, float],
    lines: list[tuple[str, int]],
    states: list[str],
    found: list[str],
) -> str:
    x, y = at
    width, height = size
    kind = _kind(node)
    title = "\n".join([node.text, *found])
    labels = []
    for n, (line, font) in enumerate(lines):
        weight = ' font-weight="bold"' if n == 0 else ""
        labels.append(
            f'<text x="{x + width / 2:.1f}" y="{y + PAD / 2 + (n + 0.8) * LINE_PX:.1f}" '
            f'font-size="{font}"{weight}>{text(line)}</text>'
        )
    return (
        f'<g class="node {" ".join([kind, *states])}" data-node="{text(node.text)}">'
        f"<title>{text(title)}</title>"
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
        f'rx="{3 if kind == "op" else 12}"/>{"".join(labels)}</g>'
    )


def _edge(points: list[tuple[float, float]]) -> str:
    """Through its points, as vertical-tangent curves, ending in an arrowhead."""
    (x0, y0), *rest = points
    d = [f"M{x0:.1f} {y0:.1f}"]
    for x1, y1 in rest:
        mid = (y0 + y1) / 2
        d.append(f"C{x0:.1f} {mid:.1f} {x1:.1f} {mid:.1f} {x1:.1f} {y1:.1f}")
        x0, y0 = x1, y1
    return f'<path class="edge" d="{"".join(d)}" marker-end="url(#gc-arrow)"/>'
