"""A layered (Sugiyama-style) layout of a small DAG, top to bottom: arguments above.

The steps are Graphviz `dot`'s, each in its simplest form, which expression graphs
(tens of nodes) need no more than: layers by longest path, with sources pulled down
next to their first consumer; a virtual point on every layer an edge crosses; a few
barycenter sweeps to reduce crossings, keeping the best order seen; then each node
moved towards the mean of its neighbours, as far as its layer's order and spacing allow.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

SWEEPS = 4  # crossing-reduction rounds (down and up); the best order seen is kept
GAP = 18.0  # horizontal space between two boxes of a layer
VIRTUAL_WIDTH = 6.0  # an edge's point on a layer it crosses


@dataclass
class Layout:
    x: list[float]  # centre of each node
    layer: list[int]  # 0 at the top
    edges: list[list[tuple[float, int]]]  # each edge's (x, layer) points, argument first
    edge_ends: list[tuple[int, int]]  # each edge's (argument, consumer)
    width: float
    layers: int


def layered(args: list[list[int]], widths: list[float]) -> Layout:
    """Lay out the DAG whose node i has arguments `args[i]`, each earlier than i."""
    layer = _layers(args)
    rows: list[list[int]] = [[] for _ in range(max(layer, default=0) + 1)]
    width = list(widths)
    chains: dict[tuple[int, int], list[int]] = {}  # an edge's vertices, argument first
    for i in range(len(args)):
        rows[layer[i]].append(i)
    for consumer, argument in ((c, a) for c, a_list in enumerate(args) for a in a_list):
        if (argument, consumer) in chains:
            continue  # an argument used twice by one node (x * x): one edge
        chain = [argument]
        for row in range(layer[argument] + 1, layer[consumer]):
            rows[row].append(len(width))
            width.append(VIRTUAL_WIDTH)
            chain.append(len(width) - 1)
        chains[argument, consumer] = [*chain, consumer]
    up, down = _neighbours(chains.values(), len(width))
    rows = _order(rows, up, down)
    x = _coordinates(rows, width, up, down)
    left = min((x[v] - width[v] / 2 for row in rows for v in row), default=0.0)
    # Rounded to a millionth of a unit: the leftmost node's edge is then 0, not -1e-14.
    x = [round(value - left, 6) for value in x]
    vertex_layer = {v: r for r, row in enumerate(rows) for v in row}
    return Layout(
        x=x[: len(args)],
        layer=layer,
        edges=[[(x[v], vertex_layer[v]) for v in chain] for chain in chains.values()],
        edge_ends=list(chains),
        width=max((x[v] + width[v] / 2 for row in rows for v in row), default=0.0),
        layers=len(rows),
    )


def _layers(args: list[list[int]]) -> list[int]:
    layer = [0] * len(args)
    for i, arguments in enumerate(args):
        layer[i] = 1 + max((layer[a] for a in arguments), default=-1)
    for i in reversed(range(len(args))):  # a source sits just above its first consumer
        if not args[i]:
            consumers = [layer[c] for c, a_list in enumerate(args) if i in a_list]
            layer[i] = min(consumers, default=1) - 1
    return layer


def _neighbours(chains, count: int) -> tuple[list[list[int]], list[list[int]]]:
    up: list[list[int]] = [[] for _ in range(count)]
    down: list[list[int]] = [[] for _ in range(count)]
    for chain in chains:
        for above, below in pairwise(chain):
            up[below].append(above)
            down[above].append(below)
    return up, down


def _order(rows: list[list[int]], up: list[list[int]], down: list[list[int]]):
    best, best_crossings = [list(r) for r in rows], _crossings(rows, down)
    for _ in range(SWEEPS if best_crossings else 0):  # a tree drawn in order has none
        for r in range(1, len(rows)):
            rows[r] = _by_barycenter(rows[r], rows[r - 1], up)
        for r in reversed(range(len(rows) - 1)):
            rows[r] = _by_barycenter(rows[r], rows[r + 1], down)
        crossings = _crossings(rows, down)
        if crossings < best_crossings:
            best, best_crossings = [list(r) for r in rows], crossings
    return best


def _by_barycenter(row: list[int], fixed: list[int], neighbours: list[list[int]]) -> list[int]:
    position = {v: i for i, v in enumerate(fixed)}

    def key(item: tuple[int, int]) -> float:
        here, v = item
        linked = [position[n] for n in neighbours[v] if n in position]
        return sum(linked) / len(linked) if linked else here  # unlinked: stays put

    return [v for _, v in sorted(enumerate(row), key=key)]


def _crossings(rows: list[list[int]], down: list[list[int]]) -> int:
    total = 0
    for upper, lower in pairwise(rows):
        position = {v: i for i, v in enumerate(lower)}
        ends = [(i, position[n]) for i, v in enumerate(upper) for n in down[v] if n in position]
        total += sum(1 for a, b in ends for c, d in ends if a < c and b > d)
    return total


def _coordinates(rows, width: list[float], up, down) -> list[float]:
    """Each row packed, then nodes pulled towards their neighbours' mean, in turns."""
    x = [0.0] * len(width)
    for row in rows:
        _place(row, [0.0] * len(row), width, x)
    for _ in range(SWEEPS):
        for ordered, neighbours in ((rows[1:], up), (rows[-2::-1], down)):
            for row in ordered:
                wanted = [_mean([x[n] for n in neighbours[v]], x[v]) for v in row]
                _place(row, wanted, width, x)
    return x


def _place(row: list[int], wanted: list[float], width: list[float], x: list[float]) -> None:
    """x as close to `wanted` as the row's order and spacing allow: pushed apart from the
    left and from the right, then the two averaged (the simple half of a priority layout)."""
    if not row:
        return
    gaps = [(width[a] + width[b]) / 2 + GAP for a, b in pairwise(row)]
    right = list(wanted)
    for i in range(1, len(row)):
        right[i] = max(right[i], right[i - 1] + gaps[i - 1])
    left = list(wanted)
    for i in reversed(range(len(row) - 1)):
        left[i] = min(left[i], left[i + 1] - gaps[i])
    for v, a, b in zip(row, left, right, strict=True):
        x[v] = (a + b) / 2


def _mean(values: list[float], default: float) -> float:
    return sum(values) / len(values) if values else default
