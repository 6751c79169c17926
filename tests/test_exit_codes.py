"""SPEC §5's exit codes where a run checks nothing: 5 when no case was selected or found
(with a line saying why), 2 for a malformed `-k`, 0 (1 with --strict) and "nothing was
checked" when every case was skipped; and `-x`, `-k` saying what they left out."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gradcheck
from gradcheck.cases.selection import matches, selector
from gradcheck.cli import app
from gradcheck.errors import UsageError

ENV = {"COLUMNS": "200", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
CASES = """\
cases:
  - name: mul_twice
    expr: x * x
    inputs: {x: [1.0, 2.0]}
    tags: [elementwise]
  - name: tanh_matmul
    expr: tanh(x @ w)
    inputs: {x: {shape: [2, 3]}, w: {shape: [3, 2]}}
    tags: [matmul, slow]
  - name: exp_sum
    expr: sum(exp(x))
    inputs: {x: [0.5, -1.0]}
"""
# An engine with no op at all: every case is unsupported, so nothing is ever checked.
NO_OPS = """\
class Engine:
    name = "no-ops"
    def leaf(self, name, value): return value
    def value(self, node): return node
    def grad(self, output, wrt, cotangent): raise NotImplementedError
"""


@pytest.fixture(autouse=True)
def _in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "three.yaml").write_text(CASES)
    (tmp_path / "no_ops.py").write_text(NO_OPS)


def run(*args: str):
    result = CliRunner().invoke(app, ["run", *args], env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def last_line(text: str) -> str:
    return text.rstrip().splitlines()[-1]


def test_k_that_selects_nothing_exits_5_saying_how_many_it_deselected():
    result = run("cases", "-k", "zzz")
    assert result.exit_code == 5
    assert last_line(result.stdout) == "no cases ran: -k 'zzz' deselected all 3 cases"
    as_json = run("cases", "-k", "zzz", "--format", "json")
    assert as_json.exit_code == 5
    report = json.loads(as_json.stdout)  # stdout stays one JSON document
    assert report["cases"] == [] and report["summary"]["deselected"] == 3
    assert as_json.stderr == "gradcheck: no cases ran: -k 'zzz' deselected all 3 cases\n"


def test_k_says_how_many_it_deselected():
    result = run("cases", "-k", "matmul or exp")
    assert result.exit_code == 0
    assert last_line(result.stdout).startswith("2 passed, 1 deselected in ")
    report = json.loads(run("cases", "-k", "mul_twice", "--format", "json").stdout)
    assert report["summary"]["passed"] == 1 and report["summary"]["deselected"] == 2


@pytest.mark.parametrize(
    "keyword", ["matmul and", "and matmul", "not", "(matmul or exp", "matmul exp", ")"]
)
def test_a_malformed_k_is_a_usage_error(keyword: str):
    result = run("cases", "-k", keyword)
    assert result.exit_code == 2
    assert result.stdout == ""  # nothing ran, nothing reported
    assert result.stderr.startswith(f"gradcheck: error: -k {keyword!r} is not a selection")


def test_an_empty_folder_and_a_file_without_cases_exit_5(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    empty = run("empty")
    assert empty.exit_code == 5
    assert last_line(empty.stdout) == "no cases ran: no case files (*.yaml, *.yml) in empty"
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "nothing.yaml").write_text("cases: []\n")
    hollow = run("none")
    assert hollow.exit_code == 5
    assert last_line(hollow.stdout) == "no cases ran: the case files in none hold no cases"


def test_a_missing_path_stays_a_usage_error():
    result = run("no_such_folder")
    assert result.exit_code == 2
    assert "no_such_folder: no such file or folder" in result.stderr


def test_invalid_cases_beat_exit_5(tmp_path: Path):
    """-k never hides a broken case file: it is reported, and the run exits 2."""
    (tmp_path / "cases" / "broken.yaml").write_text("cases:\n  - name: b\n    expr: x +\n")
    result = run("cases", "-k", "zzz")
    assert result.exit_code == 2
    assert "INVALID" in result.stderr  # problems go to stderr, the report to stdout
    assert "1 invalid" in result.stdout


def test_a_run_that_skipped_everything_says_nothing_was_checked():
    lenient = run("cases", "--engine", "no_ops.py", "--isolate", "none")
    assert lenient.exit_code == 0  # SPEC §5: every case skipped exits 0 ...
    assert last_line(lenient.stdout).startswith("3 skipped in ")
    assert last_line(lenient.stdout).endswith("; nothing was checked")  # ... and says so
    strict = run("cases", "--engine", "no_ops.py", "--isolate", "none", "--strict")
    assert strict.exit_code == 1
    assert last_line(strict.stdout).startswith("3 failed in ")
    assert last_line(strict.stdout).endswith("; nothing was checked")


def test_a_run_that_checked_something_does_not_say_nothing_was_checked():
    checked = run("cases", "-k", "mul_twice")
    assert checked.exit_code == 0 and "nothing was checked" not in checked.stdout


def test_the_api_reports_the_same():
    nothing = gradcheck.run("cases", keyword="zzz")
    assert nothing.exit_code == 5 and not nothing.passed
    assert nothing.nothing_found == "-k 'zzz' deselected all 3 cases"
    skipped = gradcheck.run("cases", engine=os.path.abspath("no_ops.py"), isolate="none")
    assert skipped.passed and skipped.nothing_checked
    with pytest.raises(UsageError, match="expected a name or tag after 'and'"):
        gradcheck.run("cases", keyword="matmul and")


# -- the -k language -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "selected"),
    [
        ("twice", ["mul_twice"]),  # a substring of the name ...
        ("slow", ["tanh_matmul"]),  # ... or of a tag
        ("MATMUL", ["tanh_matmul"]),  # ignoring case
        ("not matmul", ["mul_twice", "exp_sum"]),
        ("mul", ["mul_twice", "tanh_matmul"]),
        ("twice or exp and not sum", ["mul_twice"]),  # and binds tighter than or
        ("(twice or exp) and not sum", ["mul_twice"]),
        ("(twice or exp) and not twice", ["exp_sum"]),
        ("not not exp", ["exp_sum"]),
        ("elementwise or (slow and tanh)", ["mul_twice", "tanh_matmul"]),
    ],
)
def test_k_expressions(keyword: str, selected: list[str]):
    cases = {"mul_twice": ["elementwise"], "tanh_matmul": ["matmul", "slow"], "exp_sum": []}
    chosen = selector(keyword)
    assert [name for name, tags in cases.items() if chosen(name, tags)] == selected
    assert [name for name, tags in cases.items() if matches(keyword, name, tags)] == selected


def test_k_errors_say_what_is_wrong():
    with pytest.raises(UsageError, match=r"'\(' is not closed"):
        selector("(mul or exp")
    with pytest.raises(UsageError, match="after 'mul', got 'exp'"):
        selector("mul exp")
    with pytest.raises(UsageError, match="at the start, got 'or'"):
        selector("or exp")


def test_fail_fast_says_how_many_cases_did_not_run():
    wrong = textwrap.dedent(
        """\
        from gradcheck.engines.builtin import BuiltinEngine

        class Engine(BuiltinEngine):
            name = "wrong-mul"
            def mul(self, a, b):
                return BuiltinEngine.add(self, a, b)
        """
    )
    Path("wrong.py").write_text(wrong)
    result = run("cases", "--engine", "wrong.py", "--isolate", "none", "-x", "--no-diagnose")
    assert result.exit_code == 1
    assert last_line(result.stdout).startswith("1 failed, 2 not run in ")
    assert "NOT RUN" not in result.stdout
    report = json.loads(
        run("cases", "-e", "wrong.py", "--isolate", "none", "-x", "-f", "json").stdout
    )
    assert [c["status"] for c in report["cases"]] == ["failed", "not run", "not run"]
