"""The HTML report's pictures: heatmaps and the expression graph, fed real comparisons.

Arrays go through `compare`, as in a run; what a picture must show (which cells are
outlined, hatched, titled) is worked out here from the arrays, not from the drawing code.
"""

from __future__ import annotations

import math
import re
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import load_paths
from gradcheck.cases.loader import load_case
from gradcheck.cases.model import Tolerance
from gradcheck.comparison.compare import compare
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.report import to_html
from gradcheck.report.graph_layout import GAP, layered
from gradcheck.report.heatmap_slices import CELL_BUDGET, MAX_CELLS, MAX_SLICES
from gradcheck.report.svg_heatmap import PALETTE, colours, heatmaps
from gradcheck.results import CaseResult, Hint, NodeResult, RunResult
from gradcheck.runner import RunOptions, run
from html_page import SVG, classes, find, one, parse, text_of, titles

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = Tolerance(rtol=1e-5, atol=1e-8)
SIZE_CAP = 2_000_000  # bytes: the page for three failing (8, 512, 512) inputs stays below


# --- heatmaps --------------------------------------------------------------------------


def figure(reference: np.ndarray, engine: np.ndarray, name: str = "x"):
    return parse(
        f"<!DOCTYPE html><title>t</title>{heatmaps(name, compare(reference, engine, TOLERANCE))}"
    )


def cells(panel) -> list[dict[str, str]]:
    return [dict(r.attrib) for r in panel.iter(f"{SVG}rect")]


def outline_edges(panel) -> set[tuple[int, int, str]]:
    """The outline's unit edges: (x, y, "h" or "v") in cell units."""
    (path,) = [p for p in panel.iter(f"{SVG}path") if "bad" in classes(p)]
    px = int(cells(panel)[0]["width"])
    found = re.findall(r"M(\d+) (\d+)([hv])(\d+)", path.get("d", ""))
    return {(int(x) // px, int(y) // px, d) for x, y, d, length in found if int(length) == px}


def test_the_outline_is_the_border_of_the_mismatched_elements() -> None:
    reference = np.arange(30.0).reshape(5, 6)
    engine = reference.copy()
    engine[1:3, 1:3] += 1.0  # a wrong block
    engine[4, 5] -= 1.0  # and a lone element in a corner
    bad = np.abs(engine - reference) > TOLERANCE.atol + TOLERANCE.rtol * np.abs(reference)
    difference = find(figure(reference, engine), "svg", "heatmap")[2]
    flagged = [t.endswith("(mismatched)") for t in titles(difference)[1:]]
    assert flagged == bad.reshape(-1).tolist()
    padded = np.pad(bad, 1)
    expected = set()
    for r, c in zip(*np.nonzero(bad), strict=True):
        if not padded[r, c + 1]:
            expected.add((c, r, "h"))  # top
        if not padded[r + 2, c + 1]:
            expected.add((c, r + 1, "h"))  # bottom
        if not padded[r + 1, c]:
            expected.add((c, r, "v"))  # left
        if not padded[r + 1, c + 2]:
            expected.add((c + 1, r, "v"))  # right
    assert outline_edges(difference) == expected


def test_one_diverging_scale_for_the_three_panels() -> None:
    reference = np.array([[2.0, -1.0], [0.5, 3.0]])
    engine = np.array([[4.0, -1.0], [0.5, 1.0]])  # difference [[2, 0], [0, -2]]
    root = figure(reference, engine)
    ref, _, diff = find(root, "svg", "heatmap")
    assert cells(ref)[0]["fill"] == cells(diff)[0]["fill"]  # the value 2 in two panels
    assert cells(diff)[1]["fill"] == cells(diff)[2]["fill"] == colours(np.zeros(1), 1.0)[0]
    legend = [t.text for t in one(root, "svg", "legend").iter(f"{SVG}text")]
    assert legend == ["-4", "0", "4"]  # the largest magnitude in any panel


def test_palette_reads_in_grey_magnitude_by_lightness_sign_by_hatching() -> None:
    grey = PALETTE @ [0.2126, 0.7152, 0.0722]  # what a grey printer keeps
    middle = len(PALETTE) // 2
    assert np.all(np.diff(grey[: middle + 1]) > 0) and np.all(np.diff(grey[middle:]) < 0)
    values = np.array([[-2.0, 1.0], [-0.5, 2.0]])
    diff = find(figure(values, np.zeros((2, 2))), "svg", "heatmap")[0]  # the reference panel
    (hatch,) = [p for p in diff.iter(f"{SVG}path") if "neg" in classes(p)]
    px = int(cells(diff)[0]["width"])
    hatched = {(int(x) // px, int(y) // px) for x, y in re.findall(r"M(\d+) (\d+)", hatch.get("d"))}
    assert hatched == {(c, r) for r, c in zip(*np.nonzero(values < 0), strict=True)}


def test_rank_above_two_shows_the_slices_with_most_mismatches() -> None:
    reference = np.ones((10, 3, 4))
    engine = reference.copy()
    engine[7] += 1.0
    engine[2, 0, 0] += 1.0
    root = figure(reference, engine)
    panels = find(root, "svg", "heatmap")
    labels = [t.text for t in panels[0].iter(f"{SVG}text") if "slice" in classes(t)]
    assert len(labels) == MAX_SLICES and {"x[2]", "x[7]"} <= set(labels)
    assert labels == sorted(labels, key=lambda s: int(s[2:-1]))
    assert f"Showing {MAX_SLICES} of 10 slices" in text_of(root)
    four = figure(np.ones((2, 3, 2, 2)), np.zeros((2, 3, 2, 2)))
    labels = [t.text for t in find(four, "svg", "heatmap")[0].iter(f"{SVG}text")
              if "slice" in classes(t)]  # fmt: skip
    assert labels == ["x[0, 0]", "x[0, 1]", "x[0, 2]", "x[1, 0]"]


def test_large_arrays_are_downsampled_and_a_lone_wrong_element_stays_visible() -> None:
    rng = np.random.default_rng(0)
    reference = rng.normal(size=(200, 300))
    engine = reference.copy()
    engine[123, 45] += 5.0
    root = figure(reference, engine)
    difference = find(root, "svg", "heatmap")[2]
    assert len(cells(difference)) <= CELL_BUDGET
    (flagged,) = [t for t in titles(difference) if "mismatched" in t]
    assert flagged.startswith("x[123, 45]: ") and "1 mismatched" in flagged
    assert len(outline_edges(difference)) == 4  # one block, a square
    block = f"{math.ceil(200 / MAX_CELLS)}x{math.ceil(300 / MAX_CELLS)}"
    assert f"Downsampled: each cell is a block of up to {block} elements" in text_of(root)


def test_scalars_rows_nans_and_shape_mismatches() -> None:
    scalar = find(figure(np.array(1.0), np.array(3.0)), "svg", "heatmap")
    assert [len(cells(p)) for p in scalar] == [1, 1, 1]
    assert titles(scalar[2])[1] == "x: reference 1, engine 3, difference 2 (mismatched)"
    row = find(figure(np.arange(5.0), np.arange(5.0) * 2), "svg", "heatmap")
    assert len({c["y"] for c in cells(row[0])}) == 1 and len(cells(row[0])) == 5
    engine = np.array([1.0, np.nan, 3.0])
    nan = find(figure(np.array([1.0, 2.0, 3.0]), engine), "svg", "heatmap")
    assert [c["fill"] == "url(#gc-nan)" for c in cells(nan[1])] == [False, True, False]
    assert "an empty array" in text_of(figure(np.ones((2, 0)), np.ones((2, 1))))
    shapes = figure(np.ones((2, 2)), np.ones((2, 2, 2)))
    assert [p.get("data-panel") for p in find(shapes, "svg", "heatmap")] == ["reference", "engine"]
    assert "The shapes differ ((2, 2) against (2, 2, 2))" in text_of(shapes)


# --- the expression graph --------------------------------------------------------------


@pytest.mark.parametrize("path", sorted((ROOT / "cases").glob("*.yaml")), ids=lambda p: p.name)
def test_layout_of_every_shipped_expression_flows_down_without_overlaps(path: Path) -> None:
    for case in load_paths([path]):
        graph = case.expression.outline()
        widths = [10.0 + 7 * len(node.text) for node in graph]
        layout = layered([node.args for node in graph], widths)
        for i, node in enumerate(graph):
            assert all(layout.layer[a] < layout.layer[i] for a in node.args)
            left, right = layout.x[i] - widths[i] / 2, layout.x[i] + widths[i] / 2
            assert left >= 0 and right <= layout.width
        assert layout.layer[-1] == max(layout.layer)  # the output at the bottom
        for row in range(layout.layers):
            boxes = sorted(
                (layout.x[i] - widths[i] / 2, layout.x[i] + widths[i] / 2)
                for i in range(len(graph))
                if layout.layer[i] == row
            )
            assert all(b[0] - a[1] >= GAP - 1e-9 for a, b in pairwise(boxes))
        for points in layout.edges:
            assert [row for _, row in points] == list(range(points[0][1], points[-1][1] + 1))


def graph_of(case: CaseResult) -> dict[str, set[str]]:
    root = parse(to_html(RunResult("e", "tf", [case], 0), tool_version="1"))
    nodes = find(one(root, "svg", "graph"), "g", "node")
    return {g.get("data-node") or "": classes(g) - {"node"} for g in nodes}


def test_graph_marks_nodes_from_localisation_and_from_hints() -> None:
    expr = "h = tanh(x @ w)\nsum(h * h + relu(h) * 2.0)"
    parsed = load_case({"name": "c", "expr": expr, "inputs": {"x": [[1.0]], "w": [[2.0]]}})
    base = dict(name="c", file="c.yaml", line=1, status="failed", expr=expr,
                graph=parsed.expression.outline())  # fmt: skip
    kink = Hint("kink", "relu at 0", "fix", "exact", op="relu", node="relu(h)")
    op_vjp = Hint("op-vjp", "tanh wrong", "fix", "likely", op="tanh", node="tanh(x @ w)")
    nodes = [
        NodeResult("tanh(x @ w)", "tanh", "failed", [0]),
        NodeResult("x @ w", "matmul", "passed"),
    ]
    marked = graph_of(CaseResult(**base, hints=[kink, op_vjp], nodes=nodes))
    assert marked["relu(h)"] == {"op", "failing", "highlighted"}
    assert marked["tanh(x @ w)"] == {"op", "failing"}
    assert marked["x @ w"] == {"op"} and marked["x"] == {"input"} and marked["2.0"] == {"literal"}
    assert marked["sum(h * h + relu(h) * 2.0)"] == {"op", "output"}
    fingerprint = Hint("fault:tanh.from-input", "m", "fix", "exact", op="tanh")
    marked = graph_of(CaseResult(**base, hints=[fingerprint], nodes=nodes))
    assert {n for n, c in marked.items() if "highlighted" in c} == {"tanh(x @ w)"}


def test_a_failing_node_says_the_mechanism_found_there() -> None:
    expr = "h = tanh(x)\nh * sin(h)"
    parsed = load_case({"name": "c", "expr": expr, "inputs": {"x": [[1.0]]}})
    base = dict(name="c", file="c.yaml", line=1, status="failed", expr=expr,
                graph=parsed.expression.outline())  # fmt: skip
    op_vjp = Hint("op-vjp", "m", "fix", "exact", op="tanh", node="tanh(x)", arg=0,
                  mechanism="ignores-upstream")  # fmt: skip
    driver = Hint("backprop-driver", "m", "fix", "exact", node="sin(h)", mechanism="per-path")
    case = CaseResult(
        **base, hints=[op_vjp, driver], nodes=[NodeResult("tanh(x)", "tanh", "failed", [0])]
    )
    root = parse(to_html(RunResult("e", "tf", [case], 0), tool_version="1"))
    said = {g.get("data-node"): text_of(g) for g in find(one(root, "svg", "graph"), "g", "node")}
    assert "wrong VJP for x (ignores-upstream)" in said["tanh(x)"]
    assert "backprop-driver (per-path)" in said["sin(h)"]
    listed = text_of(one(root, "ul", "hints"))  # the other explanations say it too
    assert "backprop-driver per-path (exact)" in listed


# --- a large case ----------------------------------------------------------------------

LARGE = """\
cases:
  - name: large
    expr: matmul(matmul(x, y), z)
    dtype: float32
    cotangent: random
    tolerance: {rtol: 1.0e-4, atol: 1.0e-3}
    inputs:
      x: {shape: [8, 512, 512], init: uniform, low: -1, high: 1}
      y: {shape: [8, 512, 512], init: uniform, low: -0.1, high: 0.1}
      z: {shape: [8, 512, 512], init: uniform, low: -0.1, high: 0.1}
"""


def test_a_large_case_gives_a_page_under_the_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "large.yaml"
    path.write_text(LARGE)
    engine = lambda: FaultyEngine(FAULTS["backprop.no-upstream"])  # every gradient wrong
    result = run(load_paths([path]), engine, RunOptions(diagnose=False))
    assert [i.status for i in result.cases[0].inputs] == ["failed"] * 3
    page = to_html(result, tool_version="1")
    assert len(page.encode()) < SIZE_CAP
    root = parse(page)
    panels = find(root, "svg", "heatmap")
    assert len(panels) == 9 and all(len(cells(p)) <= CELL_BUDGET for p in panels)
    said = text_of(root)
    assert f"Showing {MAX_SLICES} of 8 slices" in said and "Downsampled" in said
    block = math.ceil(512 / math.isqrt(CELL_BUDGET // MAX_SLICES))
    assert f"a block of up to {block}x{block} elements" in said
