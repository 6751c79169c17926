"""CI integrations: `--format github` annotations, `--output` beside them, the pre-commit hook."""

from __future__ import annotations

import re
import textwrap
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gradcheck.cli import app
from gradcheck.report import to_github
from gradcheck.report.github_report import annotation, escape_data, escape_property
from gradcheck.results import CaseResult, Hint, RunResult

ROOT = Path(__file__).resolve().parents[1]
SEED_ENGINE = str(ROOT / "examples" / "seed_engine.py")
ENV = {"COLUMNS": "240", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
ANNOTATION = re.compile(
    r"^::error file=(?P<file>[^,]*),line=(?P<line>\d+),title=(?P<title>[^:]*)::"
)

TOP = Hint(
    code="fault:matmul.full-transpose",
    message="matmul's VJP transposes every axis",
    fix="swap only the last two axes: tf.linalg.matrix_transpose(b)",
    confidence="exact",
)
OTHER = Hint(code="op-vjp", message="matmul's VJP is wrong", fix="fix it", confidence="likely")


def case(name: str, status: str, *, file: str = "cases/a.yaml", line: int = 3, **kw) -> CaseResult:
    return CaseResult(name, file, line, status, **kw)  # type: ignore[arg-type]


def run_of(*cases: CaseResult) -> RunResult:
    return RunResult(engine="e", reference="tensorflow 2.x", cases=list(cases), duration_s=0.5)


def parse(line: str) -> dict[str, str]:
    match = ANNOTATION.match(line)
    assert match, line
    return {**match.groupdict(), "message": line[match.end() :]}


def unescape(text: str) -> str:
    """What the Actions runner does to a value (the reverse of the escaping, %25 last)."""
    for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(code, char)
    return text


# --- the format ------------------------------------------------------------------------


def test_one_annotation_per_failed_error_and_invalid_case_none_for_the_rest() -> None:
    text = to_github(
        run_of(
            case("ok", "passed"),
            case("bad", "failed", line=7, hints=[TOP, OTHER], message="ignored"),
            case("skip", "skipped", message="unsupported: engine has no method for exp"),
            case("boom", "error", line=12, message="the engine raised ValueError: boom"),
            case("typo", "invalid", file="cases/b.yml", line=4, message="foo(x): unknown op 'foo'"),
        )
    )
    assert text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) == 3
    bad, boom, typo = map(parse, lines)
    assert (bad["file"], bad["line"]) == ("cases/a.yaml", "7")
    assert unescape(bad["title"]) == "gradcheck: bad"
    # The headline (top hint's code and message) and the top hint's fix; no other hint.
    assert unescape(bad["message"]) == (
        "fault:matmul.full-transpose: matmul's VJP transposes every axis\n"
        "fix: swap only the last two axes: tf.linalg.matrix_transpose(b)"
    )
    assert unescape(boom["message"]) == "the engine raised ValueError: boom"
    assert (boom["line"], unescape(boom["title"])) == ("12", "gradcheck: boom")
    assert (typo["file"], typo["line"]) == ("cases/b.yml", "4")
    assert unescape(typo["message"]) == "foo(x): unknown op 'foo'"


def test_nothing_when_every_case_passed_or_was_skipped() -> None:
    assert to_github(run_of(case("ok", "passed"), case("skip", "skipped"))) == ""
    assert to_github(run_of()) == ""


def test_escaping_as_the_runner_requires() -> None:
    assert escape_data("50% a\r\nb: c, d") == "50%25 a%0D%0Ab: c, d"
    assert escape_property("50% a\r\nb: c, d") == "50%25 a%0D%0Ab%3A c%2C d"
    # `%` first, so an escape already in the text is kept, not decoded by the runner.
    assert escape_data("%0A") == "%250A"
    line = annotation(
        case("a,b:c%", "failed", file="dir, x/c:d.yaml", message="line 1\nline 2: 100%\r")
    )
    assert "\n" not in line and "\r" not in line
    parsed = parse(line)
    assert unescape(parsed["file"]) == "dir, x/c:d.yaml"
    assert unescape(parsed["title"]) == "gradcheck: a,b:c%"
    # Newlines are the message's own; a carriage return (a control character) is shown.
    assert unescape(parsed["message"]) == "line 1\nline 2: 100%\\x0d"
    # Properties hold no raw separators, so the command parses unambiguously.
    props = line.split("::")[1].removeprefix("error ")
    assert [p.split("=")[0] for p in props.split(",")] == ["file", "line", "title"]


def test_paths_use_forward_slashes_and_line_is_at_least_one() -> None:
    parsed = parse(annotation(case("c", "invalid", file=".\\cases\\x.yaml", line=0, message="m")))
    assert (parsed["file"], parsed["line"]) == ("cases/x.yaml", "1")


# --- the command line ------------------------------------------------------------------

SEED_SUITE = """\
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
      y: [[0.5, -1.0], [2.0, 1.5]]
"""
INVALID = """\
cases:
  - name: typo
    expr: nosuchop(x)
    inputs: {x: [1.0]}
"""


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with two case files, as the cwd; runs keep their cache in it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "seed.yaml").write_text(SEED_SUITE)
    (tmp_path / "cases" / "typo.yml").write_text(INVALID)
    return tmp_path


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def annotations(stdout: str) -> list[dict[str, str]]:
    return [parse(line) for line in stdout.splitlines() if line.startswith("::")]


def test_run_format_github_prints_the_report_then_annotations(suite: Path) -> None:
    # Several paths at once, as pre-commit passes them.
    result = invoke(
        "run", "cases/seed.yaml", "cases/typo.yml", "-e", SEED_ENGINE, "--format", "github"
    )
    assert result.exit_code == 2  # an invalid case file
    out = result.stdout
    assert "FAILED  cases/seed.yaml:2::batched" in out  # the rich report, for the log
    assert "PASSED  cases/seed.yaml::unbatched" in out
    found = annotations(out)
    assert [(a["file"], a["line"], unescape(a["title"])) for a in found] == [
        ("cases/seed.yaml", "2", "gradcheck: batched"),
        ("cases/typo.yml", "3", "gradcheck: typo"),
    ]
    assert unescape(found[0]["message"]).startswith("fault:matmul.full-transpose: ")
    assert "\nfix: " in unescape(found[0]["message"])
    assert out.rstrip("\n").splitlines()[-1].startswith("::error ")  # annotations come last


def test_run_format_github_passing_run_has_no_annotations(suite: Path) -> None:
    result = invoke("run", "cases/seed.yaml", "-k", "unbatched", "--format", "github")
    assert result.exit_code == 0
    assert annotations(result.stdout) == []
    assert re.match(r"1 passed, 1 deselected in |1 passed in ", result.stdout.splitlines()[-1])


def test_output_file_gets_the_format_and_the_terminal_the_rich_report(suite: Path) -> None:
    result = invoke(
        "run", "cases/seed.yaml", "-e", SEED_ENGINE, "--format", "github", "--output", "gh.txt"
    )
    assert result.exit_code == 1
    assert "FAILED  cases/seed.yaml:2::batched" in result.stdout
    assert annotations(result.stdout) == []  # the annotations went to the file
    written = (suite / "gh.txt").read_text()
    assert [a["line"] for a in annotations(written)] == ["2"]

    result = invoke(
        "run", "cases/seed.yaml", "-e", SEED_ENGINE, "--format", "junit", "-o", "report.xml"
    )
    assert result.exit_code == 1
    assert "FAILED  cases/seed.yaml:2::batched" in result.stdout
    assert not result.stdout.lstrip().startswith("<")
    testcases = ET.parse(suite / "report.xml").getroot().findall(".//testcase")
    assert [t.get("name") for t in testcases] == ["batched", "unbatched"]


# --- pre-commit ------------------------------------------------------------------------


def test_pre_commit_hook_runs_the_console_script_on_case_files() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = [h for h in hooks if h["id"] == "gradcheck"]
    scripts = {
        e.name: e.value
        for e in metadata.distribution("gradcheck").entry_points
        if e.group == "console_scripts"
    }
    command, *args = hook["entry"].split()
    assert scripts.get(command) == "gradcheck.cli:main"
    assert args == ["run"]
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is True
    files = re.compile(hook["files"])  # pre-commit applies it with re.search
    for name in ("cases/seed.yaml", "cases/nn/mlp.yml", "seed.yaml"):
        assert files.search(name), name
    for name in ("src/gradcheck/cli.py", "notes.yaml.txt", "README.md"):
        assert not files.search(name), name
    for case_file in (ROOT / "cases").glob("*.yaml"):
        assert files.search(case_file.relative_to(ROOT).as_posix())


def test_hook_entry_takes_several_files(suite: Path) -> None:
    """`gradcheck run f1.yaml f2.yaml`, as pre-commit calls the hook."""
    (suite / "cases" / "more.yaml").write_text(
        textwrap.dedent(
            """\
            cases:
              - name: square
                expr: x * x
                inputs: {x: [1.0, -2.0]}
            """
        )
    )
    _, *args = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())[0]["entry"].split()
    result = invoke(*args, "cases/seed.yaml", "cases/more.yaml")  # the builtin engine
    assert result.exit_code == 0, result.stdout
    assert "PASSED  cases/seed.yaml::batched" in result.stdout
    assert "PASSED  cases/seed.yaml::unbatched" in result.stdout
    assert "PASSED  cases/more.yaml::square" in result.stdout
