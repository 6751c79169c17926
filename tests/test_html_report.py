"""The HTML report (SPEC §11, issue 14): structure, pictures, escaping, the command line.

The seed report is made by the command line, as a user makes it; its numbers are
checked against the JSON report of the same run, never against the page's own code.
The pictures have their own tests (test_html_pictures.py); the browser renders the
page in test_html_browser.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from gradcheck.cases import load_paths
from gradcheck.cases.model import Tolerance
from gradcheck.comparison.compare import compare
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.report import to_html
from gradcheck.report.case_source import MAX_LINES, case_source
from gradcheck.results import CaseResult, Hint, InputResult, RunResult
from gradcheck.runner import run
from html_page import (
    SEED_CASES,
    SEED_ENGINE,
    SVG,
    Report,
    classes,
    find,
    invoke,
    one,
    parse,
    seed_report,
    tag,
    text_of,
    titles,
)

ROOT = Path(__file__).resolve().parents[1]


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
    """The first and last lines (1-based) with content of the case that holds `line`,
    from PyYAML's node marks."""
    root = yaml.compose(text)
    (cases,) = [value for key, value in root.value if key.value == "cases"]
    (node,) = [item for item in cases.value if item.start_mark.line + 1 <= line <= _last_line(item)]
    return node.start_mark.line + 1, _last_line(node)


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
    text = (in_tmp / "mixed.yaml").read_text()
    for case in cases.values():
        if case_id(case) in shown:
            section = shown[case_id(case)]
            assert case["status"] in classes(section)
            assert case["message"] in text_of(section)
            source = one(section, "pre", "source")
            first, last = yaml_extent(text, case["line"])
            numbers = [int(n.text or "") for n in find(source, "span", "ln")]
            assert numbers == list(range(first, last + 1))
            bold = [b.text for b in find(source, "b", "at")]
            # An invalid case's line is its problem's, inside the case: shown in bold.
            assert bold == ([text.splitlines()[case["line"] - 1]] if first != case["line"] else [])
    assert cases["broken"]["line"] > yaml_extent(text, cases["broken"]["line"])[0]
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
        inputs=[InputResult(evil, compare(np.ones(2), np.zeros(2), Tolerance(1e-5, 1e-8)))],
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


# --- the run's root causes and report card, from a real run ----------------------------


@pytest.fixture(scope="module")
def leading_only_run() -> RunResult:
    """The shipped broadcasting cases against the seed's unbroadcast (leading axes only)."""
    fault = FAULTS["broadcast.leading-only"]
    return run(load_paths([ROOT / "cases" / "broadcasting.yaml"]), lambda: FaultyEngine(fault))


def test_root_causes_and_ops_of_a_real_run_appear_in_the_summary(leading_only_run) -> None:
    plain = parse(to_html(RunResult("e", "tf", [], 0.0), tool_version="1"))
    assert "Root causes" not in text_of(plain) and not find(plain, "table", "ops")
    root = parse(to_html(leading_only_run, tool_version="1"))
    causes = text_of(one(root, "ul", "root-causes"))
    [cause] = leading_only_run.root_causes
    failing = [c.id for c in leading_only_run.cases if c.status == "failed"]
    assert f"fault:broadcast.leading-only: {len(failing)} cases ({', '.join(failing)})" in causes
    assert cause.hint.fix in causes
    assert "which fault:broadcast.no-reduce does not explain" in causes
    rows = [[text_of(c) for c in row] for row in find(one(root, "table", "ops"), "tr")]
    assert rows[0] == ["op", "passed", "failed", "failed elsewhere", "unsupported", "found wrong"]
    for op, *counts, found in rows[1:]:
        record = leading_only_run.ops[op]
        expected = [record.passed, record.failed, record.failed_elsewhere, record.unsupported]
        assert counts == [str(n) for n in expected]
        assert ("fault:broadcast.leading-only" in found) == bool(record.failed)


def test_readme_shows_the_seed_report() -> None:
    readme = (ROOT / "README.md").read_text()
    command = "gradcheck run cases/seed.yaml --engine examples/seed_engine.py --output report.html"
    assert command in readme and "](docs/seed-report.png)" in readme
    assert (ROOT / "docs" / "seed-report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
