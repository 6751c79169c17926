"""`gradcheck check` (one expression from the command line) and `--repro DIR` (a
failing node as a script that calls the engine on that one op)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcheck.cli import app

ROOT = Path(__file__).resolve().parents[1]
PLANTED = f"{ROOT}/tests/planted_engines.py"
ENV = {"COLUMNS": "200", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}


@pytest.fixture(autouse=True)
def _in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def as_json(*args: str) -> tuple[int, dict]:
    result = invoke(*args, "--format", "json")
    return result.exit_code, json.loads(result.stdout)


def test_check_is_the_case_a_file_would_hold(tmp_path: Path):
    """The same case, from the command line and from a case file named alike: the same
    random inputs and cotangent, so the same numbers, status and diagnosis."""
    (tmp_path / "one.yaml").write_text(
        "cases:\n"
        "  - name: check\n"
        "    expr: tanh(x @ w)\n"
        "    inputs: {x: {shape: [3, 4]}, w: {shape: [4, 2], init: positive}}\n"
        "    dtype: float32\n"
        "    cotangent: random\n"
    )
    args = ("-e", f"{PLANTED}:TanhFromInput", "--isolate", "none")
    code, from_file = as_json("run", "one.yaml", *args)
    command = ("check", "tanh(x @ w)", "-i", "x=3,4", "-i", "w=4,2:positive")
    check_code, from_line = as_json(*command, "--dtype", "float32", "--cotangent", "random", *args)
    assert code == check_code == 1
    [file_case], [line_case] = from_file["cases"], from_line["cases"]
    assert line_case["file"] == "<command line>"
    for key in ("status", "inputs", "nodes", "hints", "forward", "engine_dtype"):
        assert line_case[key] == file_case[key], key
    assert line_case["hints"][0]["code"] == "fault:tanh.from-input"


def test_check_takes_literals_scalars_and_inits():
    code, report = as_json(
        "check", "sum(x * y, axis=1) * s", "-i", "x=[[1.0, 2.0], [3.0, 4.0]]",
        "-i", "y=2,2:uniform", "-i", "s=()", "--wrt", "x", "--seed", "3",
    )  # fmt: skip
    assert code == 0, report
    [case] = report["cases"]
    assert case["status"] == "passed"
    assert [i["name"] for i in case["inputs"]] == ["x"]  # --wrt
    assert case["inputs"][0]["reference_shape"] == [2, 2]


def test_check_reports_problems_as_a_case_file_does():
    mismatch = invoke("check", "x @ w", "-i", "x=3,4", "-i", "w=3,2")
    assert mismatch.exit_code == 2
    # on stderr, as a case file's problems are; the report (stdout) counts the case
    problem = " ".join(mismatch.stderr.split())
    assert "INVALID <command line>:1: x @ w: inner dimensions 4 and 3 differ" in problem
    assert "(shapes (3, 4) and (3, 2))" in problem and "1 invalid" in mismatch.stdout
    typo = invoke("check", "x * 2.0", "-i", "x=[1.0, 'a']")
    assert typo.exit_code == 2 and "is not a number" in typo.stderr
    bad = invoke("check", "x", "-i", "x")
    assert bad.exit_code == 2 and "NAME=SIZES" in bad.stderr
    twice = invoke("check", "x", "-i", "x=2", "-i", "x=3")
    assert twice.exit_code == 2 and "given twice" in twice.stderr
    files = invoke("check", "x * 2.0", "-i", "x=3", "cases")
    assert files.exit_code == 2 and "check takes no case files" in files.stderr


def test_check_takes_every_option_of_run(tmp_path: Path):
    result = invoke(
        "check", "x * 2.0", "-i", "x=3", "--output", "r.json", "-q", "--no-cache",
        "--rtol", "0.5", "--durations", "1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "slowest 1 durations" in result.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["passed"] == 1
    assert not (tmp_path / ".gradcheck_cache").exists()
    assert invoke("check", "x", "-i", "x=3", "--no-such-option").exit_code == 2
    help_text = invoke("check", "--help").stdout
    assert "NAME=SPEC" in help_text and "Every option of `gradcheck run`" in help_text


# -- --repro ----------------------------------------------------------------------------


def run_script(script: Path, engine: str | None = None) -> subprocess.CompletedProcess:
    """The script in a fresh interpreter, from another folder; `engine`: another ENGINE."""
    if engine is not None:
        text = re.sub(r"^ENGINE = .*$", f"ENGINE = {engine!r}", script.read_text(), flags=re.M)
        script.write_text(text)
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=script.parent.parent
    )


def test_repro_scripts_reproduce_a_planted_bug_and_pass_for_a_correct_engine(tmp_path: Path):
    result = invoke(
        "check", "tanh(x @ w) * 2.0", "-i", "x=2,3", "-i", "w=3,2",
        "-e", f"{PLANTED}:TanhFromInput", "--repro", "repro",
    )  # fmt: skip
    assert result.exit_code == 1
    assert sorted(p.name for p in (tmp_path / "repro").iterdir()) == [
        "check.tanh.npz", "check.tanh.py"
    ]  # fmt: skip
    assert "--repro: 1 script(s) in repro" in result.stderr
    script = tmp_path / "repro" / "check.tanh.py"
    failing = run_script(script)
    assert failing.returncode == 1, failing.stderr
    assert "gradient of a0: MISMATCH" in failing.stdout and "value: ok" in failing.stdout
    for correct in (f"{ROOT}/tests/engines_for_tests.py:Engine", "torch", "autograd"):
        passing = run_script(script, correct)  # autograd: the functional protocol, vjp()
        assert passing.returncode == 0, (correct, passing.stdout, passing.stderr)
        assert "MISMATCH" not in passing.stdout and "gradient of a0: ok" in passing.stdout


def test_repro_names_each_failing_node_of_each_case(tmp_path: Path):
    (tmp_path / "cases.yaml").write_text(
        "cases:\n"
        "  - name: joined\n"
        "    expr: sum(concat([x, y], axis=1) * z)\n"
        "    inputs: {x: {shape: [2, 2]}, y: {shape: [2, 3]}, z: {shape: [2, 5]}}\n"
        "  - name: fine\n"
        "    expr: x * y\n"
        "    inputs: {x: [1.0], y: [2.0]}\n"
    )
    result = invoke("run", "cases.yaml", "-e", f"{PLANTED}:ConcatFirstAxis", "--repro", "out", "-q")
    assert result.exit_code == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "joined.concat.npz", "joined.concat.py"
    ]  # fmt: skip
    done = run_script(tmp_path / "out" / "joined.concat.py")
    assert done.returncode == 1 and "MISMATCH" in done.stdout, done.stdout + done.stderr


def test_repro_says_why_a_failing_case_has_no_script(tmp_path: Path):
    result = invoke(
        "check", "tanh(x)", "-i", "x=3", "-e", f"{PLANTED}:TanhFromInput",
        "--no-diagnose", "--repro", "out",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "no node fails alone (its nodes were not checked alone" in result.stderr
    assert not (tmp_path / "out").exists()
    passing = invoke("check", "tanh(x)", "-i", "x=3", "--repro", "out")
    assert passing.exit_code == 0 and "no case failed, no script written" in passing.stderr
    assert not (tmp_path / "out").exists()
