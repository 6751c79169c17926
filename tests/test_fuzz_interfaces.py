"""`gradcheck fuzz` on the command line, `gradcheck.fuzz` in Python, the gradcheck-fuzz
item in the pytest plugin (issue 13).

The question's engine (`examples/seed_engine.py`: matmul only, float32 only, the full
transpose) is fuzzed with no case file: the fuzzer must find its full-transpose bug and
write a case no larger than the question's.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import gradcheck
from gradcheck.cli import app
from gradcheck.fuzzing import Progress
from gradcheck.fuzzing.report import progress_line

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SEED_ENGINE = str(ROOT / "examples" / "seed_engine.py")
MUL_SELF = f"{ROOT / 'tests' / 'corpus' / 'tape_bugs.py'}:MulSelf"
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
# The question's case: matmul(matmul(x, y), z), inputs of 8, 4 and 8 elements.
QUESTION_OPS, QUESTION_ELEMENTS = 2, 20


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def fuzz(*args: str):
    result = CliRunner().invoke(app, ["fuzz", *args], env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def run(*args: str):
    return CliRunner().invoke(app, ["run", *args], env=ENV)


def test_the_question_engine_without_a_case_file(tmp_path):
    """Done when: `gradcheck fuzz --engine examples/seed_engine.py` finds the full
    transpose and writes a case no larger than the question's, which `gradcheck run`
    reproduces."""
    # The default budget is 1000 examples, in which seeds 0, 1 and 2 all find it; within
    # 100, seed 3 does (0, 1, 2 and 4 meet the same bug first as other hints), which keeps
    # the test short.
    result = fuzz("--engine", SEED_ENGINE, "--seed", "3", "--max-examples", "100", "--out", "found")
    assert result.exit_code == 1, result.output
    written = tmp_path / "found" / "fault-matmul.full-transpose.yaml"
    assert written.exists(), sorted(p.name for p in (tmp_path / "found").iterdir())
    (case,) = yaml.safe_load(written.read_text())["cases"]
    assert case["expr"].count("@") + case["expr"].count("matmul") <= QUESTION_OPS
    elements = sum(_size(value) for value in case["inputs"].values())
    assert elements <= QUESTION_ELEMENTS
    assert "fault:matmul.full-transpose" in result.output
    assert f"case file found{os.sep}fault-matmul.full-transpose.yaml" in result.output
    # as `gradcheck run`'s report: no blank that rich pads cells with ends a line
    assert [line for line in result.stdout.splitlines() if line != line.rstrip()] == []

    again = run(str(written), "--engine", SEED_ENGINE, "--format", "json")
    assert again.exit_code == 1
    (checked,) = json.loads(again.stdout)["cases"]
    assert checked["hints"][0]["code"] == "fault:matmul.full-transpose"


def _size(value) -> int:
    return sum(_size(v) for v in value) if isinstance(value, list) else 1


def test_a_clean_engine_exits_0_and_says_what_was_covered():
    result = fuzz("--engine", "builtin", "--max-examples", "60", "--seed", "1")
    assert result.exit_code == 0, result.output
    assert "no bug found in 60 examples" in result.output
    assert "coverage: 60 examples" in result.output
    assert os.listdir(".") == []  # nothing written without --out


def test_json_report():
    result = fuzz(
        "--engine", MUL_SELF, "--ops", "mul,add", "--max-examples", "80", "--seed", "3",
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["command"] == "fuzz" and report["seed"] == 3 and report["ops"] == ["add", "mul"]
    (bug,) = report["bugs"]
    assert (bug["hint"], bug["op"]) == ("fault:mul.self", "mul")
    assert bug["case"]["status"] == "failed" and bug["case"]["hints"][0]["code"] == bug["hint"]
    assert yaml.safe_load(bug["case_file"])["cases"][0]["name"] == "fault-mul.self"
    assert bug["file"] is None and bug["reproduced"] is True
    summary = report["summary"]
    assert summary["bugs"] == 1 and summary["examples"] == 80
    assert set(report["coverage"]["ops"]) == {"add", "mul"}


def test_fail_fast_and_time():
    result = fuzz("--engine", SEED_ENGINE, "-x", "--seed", "0", "--format", "json")
    report = json.loads(result.stdout)
    assert len(report["bugs"]) == 1 and report["summary"]["stopped"] == "max-bugs"
    timed = fuzz("--engine", "builtin", "--time", "0", "--format", "json")
    assert timed.exit_code == 0
    assert json.loads(timed.stdout)["summary"]["stopped"] == "time"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ops", "nosuch"], "unknown op 'nosuch'"),
        (["--engine", SEED_ENGINE, "--ops", "matmul,add"], "cannot fuzz add"),
        (["--dtype", "float8"], "dtype 'float8'"),
        (["--engine", "nosuch_engine.py"], "no such file"),
    ],
)
def test_usage_errors_exit_2(args, message):
    result = fuzz(*args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_the_progress_line():
    searching = Progress(examples=12, bugs=1, elapsed_s=3.2, seconds_left=56.8)
    assert progress_line(searching) == "fuzzing: 12 examples, 1 bug, 3s, 57s left"
    shrinking = Progress(40, 1, 5.0, None, shrinking=("op-vjp", "exp"), shrink_steps=1)
    assert progress_line(shrinking) == "shrinking op-vjp (exp): 1 step"


# -- Python API --------------------------------------------------------------------------


def test_the_python_api_returns_the_found_cases(tmp_path):
    report = gradcheck.fuzz(MUL_SELF, ops=["mul"], max_examples=40, out=tmp_path / "o")
    assert not report.passed and len(report) == 1
    (found,) = report
    assert (found.code, found.op) == ("fault:mul.self", "mul")
    assert found.path == tmp_path / "o" / "fault-mul.self.yaml"
    assert found.yaml == found.path.read_text()
    assert found.result.hints[0].code == "fault:mul.self" and found.reproduced
    assert "fault:mul.self" in str(report) and "cases:" in str(report)
    assert report.examples == 40 and report.seed == 0
    assert (
        gradcheck.fuzz(MUL_SELF, ops=["mul"], max_examples=40)
        .cases[0]
        .yaml.replace("fault-mul.self.yaml", str(found.path))
        == found.yaml
    )  # the same run without `out`, but the reproduce command's path
    clean = gradcheck.fuzz("builtin", ops=["add"], max_examples=20)
    assert clean.passed and list(clean) == [] and "no bug found" in str(clean)


# -- the pytest plugin -------------------------------------------------------------------


def test_the_plugin_adds_a_fuzz_item(pytester: pytest.Pytester):
    pytester.makepyfile(test_plain="def test_plain(): pass")
    pytester.makeini("[pytest]\ngradcheck_fuzz_ops = mul\n")
    found = pytester.runpytest_subprocess(
        "--gradcheck-fuzz", "40", "--gradcheck-engine", MUL_SELF, "-p", "no:cacheprovider"
    )
    found.assert_outcomes(passed=1, failed=1)
    output = found.stdout.str()
    assert "gradcheck-fuzz" in output and "fault:mul.self (mul)" in output
    assert "- name: fault-mul.self" in output  # the case file, to paste

    deselected = pytester.runpytest_subprocess(
        "--gradcheck-fuzz", "40", "--gradcheck-engine", MUL_SELF, "-k", "not fuzz"
    )
    deselected.assert_outcomes(passed=1, deselected=1)


def test_the_plugin_fuzz_item_passes_for_a_correct_engine(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\ngradcheck_fuzz = 30\ngradcheck_fuzz_ops = add mul\n")
    clean = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    clean.assert_outcomes(passed=1)
    assert "fuzz 30 examples" in clean.stdout.str()  # the report header says so


def test_the_plugin_fuzz_item_keeps_no_reference_cache_as_gradcheck_fuzz_keeps_none(
    pytester: pytest.Pytester,
):
    """A bug found is checked as a case is, and its reference is not kept."""
    pytester.makeini("[pytest]\ngradcheck_fuzz_ops = mul\n")
    args = ("--gradcheck-fuzz", "40", "--gradcheck-engine", MUL_SELF, "--gradcheck-cache-dir")
    found = pytester.runpytest_subprocess(*args, "refs", "-p", "no:cacheprovider")
    found.assert_outcomes(failed=1)
    assert "fault:mul.self (mul)" in found.stdout.str()
    assert not list((pytester.path / "refs").rglob("*.ref"))


# -- user-defined ops (SPEC §9) -----------------------------------------------------------

WRONG_SMOOTH_RELU = """\
from gradcheck.engines.builtin import BuiltinEngine


class Engine(BuiltinEngine):
    name = "wrong-smooth_relu"

    def vjp_rule(self, op, i):
        if op.name == "smooth_relu":  # g * x, where smooth_relu' is sigmoid(x)
            return lambda g, ans, x: g * x
        return super().vjp_rule(op, i)
"""


def test_fuzzing_a_user_op_loaded_with_ops(tmp_path):
    """`--ops FILE.py` loads user-defined ops (as for `run`); `--ops names` picks ops."""
    ops_file = str(ROOT / "examples" / "custom_op" / "smooth_relu_ops.py")
    (tmp_path / "wrong.py").write_text(WRONG_SMOOTH_RELU)
    clean = fuzz("--ops", ops_file, "--ops", "smooth_relu,add", "--max-examples", "40",
                 "--seed", "1", "--format", "json")  # fmt: skip
    assert clean.exit_code == 0, clean.output
    assert json.loads(clean.stdout)["ops"] == ["add", "smooth_relu"]
    found = fuzz("--engine", "wrong.py", "--ops", ops_file, "--ops", "smooth_relu",
                 "--reference", "numeric", "--max-examples", "40", "--seed", "1",
                 "--format", "json")  # fmt: skip
    assert found.exit_code == 1, found.output
    (bug,) = json.loads(found.stdout)["bugs"]
    assert bug["op"] == "smooth_relu" and "smooth_relu(x)" in bug["case"]["expr"]
    # SPEC §10: the printed command runs as printed, carrying --ops and --reference.
    (command,) = [line for line in bug["case_file"].splitlines() if "gradcheck run" in line]
    words = shlex.split(command.lstrip("# "))
    assert words[:2] == ["gradcheck", "run"] and "--ops" in words and "numeric" in words
    Path(words[2]).write_text(bug["case_file"])
    again = run(*words[2:], "--format", "json")
    assert again.exit_code == 1, again.output
    (case,) = json.loads(again.stdout)["cases"]
    assert case["status"] == "failed" and case["hints"][0]["op"] == "smooth_relu"


UNBUILDABLE_OP = """\
import numpy as np

import gradcheck


def _no_kernel(tf, x):
    raise ValueError("no kernel for this op here")


@gradcheck.op(shape=gradcheck.same_shape, vjps=[lambda g, ans, x: g * np.cos(x)], tf=_no_kernel)
def wavy(x):
    \"\"\"sin(x), whose TensorFlow builder always raises\"\"\"
    return np.sin(x)
"""
WRONG_WAVY = WRONG_SMOOTH_RELU.replace("smooth_relu", "wavy")


def test_a_case_the_reference_cannot_compute_is_counted_apart_never_a_bug(tmp_path):
    """SPEC §10: where the engine differs from the builtin engine but the reference fails,
    the generator is to blame (a domain to tighten): counted apart, exit 0, no bug."""
    (tmp_path / "wavy_ops.py").write_text(UNBUILDABLE_OP)
    (tmp_path / "wrong.py").write_text(WRONG_WAVY)
    result = fuzz("--engine", "wrong.py", "--ops", "wavy_ops.py", "--ops", "wavy",
                  "--max-examples", "20", "--seed", "1", "--format", "json")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["bugs"] == [] and report["summary"]["reference_failed"] >= 10
    text = fuzz("--engine", "wrong.py", "--ops", "wavy_ops.py", "--ops", "wavy",
                "--max-examples", "20", "--seed", "1")  # fmt: skip
    assert "the reference could not compute (the generator's)" in " ".join(text.stdout.split())


def test_a_case_file_found_from_python_names_the_engine_class(tmp_path):
    from gradcheck.engines.builtin.engine import BuiltinEngine

    class Wrong(BuiltinEngine):  # mul's VJP for a is g * a
        def vjp_rule(self, op, i):
            if op.name == "mul" and i == 0:
                return lambda g, ans, a, b: g * a
            return super().vjp_rule(op, i)

    (found,) = gradcheck.fuzz(Wrong, ops=["mul"], max_examples=30)
    assert f"--engine {Path(__file__).resolve()}:Wrong" in found.yaml
