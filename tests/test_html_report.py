"""The HTML report (SPEC §11, issue 14): structure, pictures, escaping, the command line.

The seed report is made by the command line, as a user makes it; its numbers are
checked against the JSON report of the same run, never against the page's own code.
The browser renders it in test_html_browser.py.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from gradcheck.cases import load_paths
from gradcheck.cases.loader import load_case
from gradcheck.cases.model import Tolerance
from gradcheck.cli import app
from gradcheck.comparison.compare import compare
from gradcheck.diagnosis.faults import FAULTS, FaultyEngine
from gradcheck.report import to_html
from gradcheck.report.case_source import MAX_LINES, case_source
from gradcheck.report.graph_layout import GAP, layered
from gradcheck.report.heatmap_slices import CELL_BUDGET, MAX_CELLS, MAX_SLICES
from gradcheck.report.svg_heatmap import PALETTE, colours, heatmaps
from gradcheck.results import CaseResult, Hint, InputResult, NodeResult, RunResult
from gradcheck.runner import RunOptions, run
from html_page import SVG, classes, find, one, parse, tag, text_of, titles

ROOT = Path(__file__).resolve().parents[1]
SEED_CASES, SEED_ENGINE = ROOT / "cases" / "seed.yaml", ROOT / "examples" / "seed_engine.py"
ENV = {"COLUMNS": "240", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
SIZE_CAP = 2_000_000  # bytes: the page for three failing (8, 512, 512) inputs stays below
TOLERANCE = Tolerance(rtol=1e-5, atol=1e-8)


def invoke(*args: object):
    result = CliRunner().invoke(app, [str(a) for a in args], env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@dataclass
class Report:
    page: str
    json: dict
    stdout: str
    exit_code: int


def seed_report(folder: Path) -> Report:
    """`gradcheck run cases/seed.yaml -e examples/seed_engine.py --format html -o ...`,
    and the JSON report (with arrays) of the same run."""
    common = ["run", SEED_CASES, "-e", SEED_ENGINE, "--cache-dir", folder / "cache"]
    result = invoke(*common, "--format", "html", "--output", folder / "report.html")
    as_json = json.loads(invoke(*common, "--format", "json", "--verbose").stdout)
    return Report((folder / "report.html").read_text(), as_json, result.stdout, result.exit_code)


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return seed_report(tmp_path_factory.mktemp("seed"))


def sections(root) -> dict[str, object]:
    """Each case section by the case id in its heading."""
    out = {}
    for section in find(root, "section", "case"):
        heading = text_of(one(section, "h2"))
        out[heading.split(" ", 1)[1]] = section
    return out


def case_id(case: dict) -> str:
    return f"{case['file']}:{case['line']}::{case['name']}"


# --- the seed report -------------------------------------------------------------------


def test_seed_report_is_valid_html_with_a_section_per_failing_case(seed: Report) -> None:
    assert seed.exit_code == 1
    assert "FAILED" in seed.stdout and not seed.stdout.lstrip().startswith("<")  # rich kept
    root = parse(seed.page)  # strict: any parse error fails
    shown = [c for c in seed.json["cases"] if c["status"] in ("failed", "error", "invalid")]
    assert shown and list(sections(root)) == [case_id(c) for c in shown]
    header = text_of(one(root, "header"))
    for status in ("failed", "error", "invalid", "passed", "skipped"):
        assert f"{seed.json['summary'][status]} {status}" in header
    top = seed.json["cases"][0]["hints"][0]
    assert top["message"] in header  # the contents list gives each case's headline


def test_three_heatmaps_per_failing_input_with_every_value_in_a_title(seed: Report) -> None:
    root = parse(seed.page)
    for case in seed.json["cases"]:
        section = sections(root)[case_id(case)]
        failing = [i for i in case["inputs"] if i["status"] == "failed"]
        figures = {f.get("data-input"): f for f in find(section, "div", "heatmaps")}
        assert set(figures) == {i["name"] for i in failing}
        for result in failing:
            panels = find(figures[result["name"]], "svg", "heatmap")
            assert [p.get("data-panel") for p in panels] == [
                "reference", "engine", "engine − reference"
            ]  # fmt: skip
            for panel in panels:  # small arrays: one cell per element
                assert len([e for e in panel.iter(f"{SVG}rect")]) == result["size"]
            reference = np.asarray(result["reference"], dtype=np.float64)
            engine = np.asarray(result["engine"], dtype=np.float64)
            expected = [
                f"{result['name']}[{', '.join(map(str, i))}]: reference {reference[i]:.4g}, "
                f"engine {engine[i]:.4g}, difference {engine[i] - reference[i]:.4g}"
                for i in np.ndindex(reference.shape)
            ]
            cells = [t.removesuffix(" (mismatched)") for t in titles(panels[2])[1:]]
            assert cells == expected


def test_graph_marks_failing_nodes_and_highlights_what_the_top_hint_names(seed: Report) -> None:
    root = parse(seed.page)
    for case in seed.json["cases"]:
        graph = one(sections(root)[case_id(case)], "svg", "graph")
        nodes = {g.get("data-node"): g for g in find(graph, "g", "node")}
        inputs = {name for name, g in nodes.items() if "input" in classes(g)}
        assert inputs == {i["name"] for i in case["inputs"]}
        assert set(nodes) - inputs == {n["node"] for n in case["nodes"]}
        failing = {name for name, g in nodes.items() if "failing" in classes(g)}
        assert failing == {n["node"] for n in case["nodes"] if n["status"] == "failed"}
        top = case["hints"][0]
        named = {top["node"]} if top.get("node") else set()
        of_op = {n["node"] for n in case["nodes"] if n["op"] == top.get("op")} & failing
        highlighted = {name for name, g in nodes.items() if "highlighted" in classes(g)}
        assert highlighted and highlighted == (named or of_op)
        for name in highlighted:
            assert top["code"] in text_of(nodes[name])
        (output,) = [g for g in nodes.values() if "output" in classes(g)]
        assert output.get("data-node") == case["expr"]


def test_page_needs_nothing_outside_itself(seed: Report) -> None:
    root = parse(seed.page)
    for element in root.iter():
        assert tag(element) not in ("script", "link", "iframe", "object", "embed", "img")
        for name, value in element.attrib.items():
            if name.rsplit("}", 1)[-1] in ("src", "href", "srcset", "action", "poster"):
                assert value.startswith(("data:", "#")), (tag(element), name, value)
            if name.startswith("on"):
                pytest.fail(f"script in an attribute: {name}")
    for url in re.findall(r"url\(([^)]*)\)", seed.page):
        assert url.strip("'\"").startswith(("#", "data:")), url
    assert "@import" not in seed.page


def test_top_hint_fix_and_other_explanations_sit_beside_the_pictures(seed: Report) -> None:
    root = parse(seed.page)
    for case in seed.json["cases"]:
        body = one(sections(root)[case_id(case)], "div", "body")
        explain, pictures = list(body)
        assert classes(explain) == {"explain"} and classes(pictures) == {"pictures"}
        top = one(explain, "div", "top")
        for key in ("code", "message", "fix"):
            assert case["hints"][0][key] in text_of(top)
        for hint in case["hints"][1:]:
            assert hint["message"] in text_of(explain) and hint["fix"] in text_of(explain)
        assert find(pictures, "svg", "graph") and find(pictures, "svg", "heatmap")


def test_case_source_is_shown_with_its_line_numbers(seed: Report) -> None:
    root = parse(seed.page)
    for case in seed.json["cases"]:
        source = one(sections(root)[case_id(case)], "pre", "source")
        numbers = [int(n.text or "") for n in find(source, "span", "ln")]
        first, last = yaml_extent(Path(case["file"]).read_text(), case["line"])
        assert numbers == list(range(first, last + 1))
        file_lines = Path(case["file"]).read_text().splitlines()
        shown = [(n.tail or "") for n in find(source, "span", "ln")]
        assert [line.rstrip("\n") for line in shown] == file_lines[first - 1 : last]


# --- which lines a case has: against the YAML parser's own marks -----------------------


def yaml_extent(text: str, line: int) -> tuple[int, int]:
    """The first and last lines (1-based) with content of the case whose mapping starts
    on `line`, from PyYAML's node marks."""
    root = yaml.compose(text)
    (cases,) = [value for key, value in root.value if key.value == "cases"]
    (node,) = [item for item in cases.value if item.start_mark.line + 1 == line]
    return line, _last_line(node)


def _last_line(node) -> int:
    if isinstance(node, yaml.ScalarNode):
        end = node.end_mark
        return end.line + 1 if end.column else end.line  # a block scalar ends past its "\n"
    children = node.value
    if isinstance(node, yaml.MappingNode):
        children = [part for pair in children for part in pair]
    return max(_last_line(child) for child in children)


@pytest.mark.parametrize("path", sorted((ROOT / "cases").glob("*.yaml")), ids=lambda p: p.name)
def test_case_source_agrees_with_the_yaml_parser_on_every_shipped_case(path: Path) -> None:
    text = path.read_text()
    lines = text.splitlines()
    starts = [item.line for item in load_paths([path])]
    for start in starts:
        numbered, cut = case_source(lines, start)
        first, last = yaml_extent(text, start)
        assert [n for n, _ in numbered] == list(range(first, min(last, first + MAX_LINES - 1) + 1))
        assert cut == (last - first + 1 > MAX_LINES)


# --- the command line: which format --output gets --------------------------------------


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_output_html_suffix_writes_the_page_and_the_terminal_keeps_rich(in_tmp: Path) -> None:
    result = invoke("run", SEED_CASES, "-e", SEED_ENGINE, "--output", "report.html")
    assert result.exit_code == 1
    assert "FAILED" in result.stdout and "<html" not in result.stdout
    assert find(parse((in_tmp / "report.html").read_text()), "section", "case")


def test_github_format_with_an_html_output_keeps_the_annotations(in_tmp: Path) -> None:
    result = invoke("run", SEED_CASES, "-e", SEED_ENGINE, "-f", "github", "-o", "report.html")
    assert result.exit_code == 1
    assert "FAILED" in result.stdout
    assert re.search(r"^::error file=.*seed\.yaml,line=\d+", result.stdout, re.M)
    assert find(parse((in_tmp / "report.html").read_text()), "svg", "heatmap")


def test_format_html_alone_prints_the_page(in_tmp: Path) -> None:
    result = invoke("run", SEED_CASES, "-e", SEED_ENGINE, "--format", "html")
    assert result.exit_code == 1
    assert find(parse(result.stdout), "section", "case")


def test_an_explicit_file_format_wins_over_the_suffix(in_tmp: Path) -> None:
    invoke("run", SEED_CASES, "-e", SEED_ENGINE, "--format", "json", "-o", "report.html")
    assert json.loads((in_tmp / "report.html").read_text())["summary"]["failed"] == 1


MIXED = """\
cases:
  - name: batched
    expr: matmul(x, y)
    dtype: float32
    inputs:
      x: [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]
      y: [[1.0, -1.0], [2.0, 0.5]]
  - name: unbatched
    expr: matmul(x, y)
    dtype: float32
    inputs:
      x: [[1.0, 2.0], [3.0, 4.0]]
      y: [[1.0, -1.0], [2.0, 0.5]]
  # a comment between cases belongs to neither
  - name: uses_exp
    expr: exp(x)
    inputs:
      x: [0.5, 1.5]
  - name: in_float64
    expr: matmul(x, y)
    dtype: float64
    inputs:
      x: [[1.0, 2.0], [3.0, 4.0]]
      y: [[1.0, -1.0], [2.0, 0.5]]
  - name: broken
    expr: matmul(x, y)
    inputs:
      x: [[1.0, 2.0]]
      y: [[1.0, 2.0, 3.0]]
"""


def test_every_status_a_section_or_a_line_of_the_compact_list(in_tmp: Path) -> None:
    (in_tmp / "mixed.yaml").write_text(MIXED)
    common = ["run", "mixed.yaml", "-e", SEED_ENGINE]
    invoke(*common, "-o", "report.html")
    cases = {c["name"]: c for c in json.loads(invoke(*common, "-f", "json").stdout)["cases"]}
    assert {c["status"] for c in cases.values()} == {
        "failed", "passed", "skipped", "error", "invalid"
    }  # fmt: skip
    root = parse((in_tmp / "report.html").read_text())
    shown = sections(root)
    assert sorted(shown) == sorted(
        case_id(c) for c in cases.values() if c["status"] in ("failed", "error", "invalid")
    )
    for case in cases.values():
        if case_id(case) in shown:
            section = shown[case_id(case)]
            assert case["status"] in classes(section)
            assert case["message"] in text_of(section)
            first = find(one(section, "pre", "source"), "span", "ln")[0]
            assert int(first.text or "") == case["line"]
    error = cases["in_float64"]
    assert " ".join(error["traceback"].split()) in text_of(shown[case_id(error)])
    listed = {text_of(li) for li in find(one(root, "ul", "compact"), "li")}
    assert listed == {
        " ".join([c["status"].upper(), f"{c['file']}::{c['name']}", *c["message"].split()])
        for c in cases.values()
        if c["status"] in ("passed", "skipped")
    }
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    for link in find(root, "a"):
        assert link.get("href", "").removeprefix("#") in ids


# --- user text is text -----------------------------------------------------------------


def test_names_messages_and_source_are_escaped(tmp_path: Path) -> None:
    evil = '<script>alert("x")</script> & <b>bold</b>'
    path = tmp_path / "evil.yaml"
    path.write_text(f"cases:\n  - name: evil\n    # {evil}\n    expr: x\n")
    hint = Hint("kink", f"{evil} \x1b[31mred\x1b[0m", "fix </pre> it", "possible", node="x")
    case = CaseResult(
        name=evil,
        file=str(path),
        line=2,
        status="failed",
        expr="x & y",
        message="bell\x07 nul\x00 lone \ud800 surrogate",
        inputs=[InputResult(evil, compare(np.ones(2), np.zeros(2), TOLERANCE))],
        hints=[hint],
        traceback=evil,
    )
    page = to_html(RunResult("e<", "tf", [case], 0.1), tool_version="1")
    page.encode("utf-8")  # writable as UTF-8
    root = parse(page)
    assert not find(root, "script") and "bold" not in [b.text for b in find(root, "b")]
    text = text_of(one(root, "body"))
    assert evil in text and f"{evil} red" in text and "\x1b" not in page
    assert "bell\\x07 nul\\x00 lone \\ud800 surrogate" in text
    assert f"# {evil}" in text_of(one(root, "pre", "source"))


# --- the run's root causes, when the results carry them --------------------------------


class RunWithDiagnosis(RunResult):
    """A run whose summary has SPEC §6.2's run-level keys (issue 11 adds them)."""

    @property
    def summary(self) -> dict:
        return {
            **super().summary,
            "root_causes": [
                {
                    "hint": {
                        "code": "fault:broadcast.leading-only",
                        "message": "m <1>",
                        "fix": "sum over every broadcast axis",
                        "confidence": "exact",
                    },
                    "cases": ["a.yaml::one", "a.yaml::two"],
                }
            ],
            "ops": {"matmul": {"passed": 3, "failed": 1, "unsupported": 0}},
        }


def test_root_causes_and_ops_appear_when_the_summary_has_them() -> None:
    plain = parse(to_html(RunResult("e", "tf", [], 0.0), tool_version="1"))
    assert "Root causes" not in text_of(plain) and not find(plain, "table", "ops")
    root = parse(to_html(RunWithDiagnosis("e", "tf", [], 0.0), tool_version="1"))
    causes = text_of(one(root, "ul", "root-causes"))
    assert "fault:broadcast.leading-only: 2 cases (a.yaml::one, a.yaml::two)" in causes
    assert "m <1>" in causes and "sum over every broadcast axis" in causes
    rows = [[text_of(c) for c in row] for row in find(one(root, "table", "ops"), "tr")]
    assert rows == [["op", "passed", "failed", "unsupported"], ["matmul", "3", "1", "0"]]


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


def test_readme_shows_the_seed_report() -> None:
    readme = (ROOT / "README.md").read_text()
    command = "gradcheck run cases/seed.yaml --engine examples/seed_engine.py --output report.html"
    assert command in readme and "](docs/seed-report.png)" in readme
    assert (ROOT / "docs" / "seed-report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
