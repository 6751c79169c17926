"""The Python API: `gradcheck.check` one expression, `gradcheck.run` case files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import engines_for_tests as E
import gradcheck
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.errors import GradcheckError, UsageError

ROOT = Path(__file__).resolve().parents[1]
MUL_SUM = "sum(x * y, axis=1)"
INPUTS = {"x": {"shape": [2, 3]}, "y": [[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]]}


class WrongMulEngine(BuiltinEngine):
    """The builtin engine with mul's VJP for `a` multiplying by `a` instead of `b`."""

    name = "wrong-mul"

    def vjp_rule(self, op, i):
        if op.name == "mul" and i == 0:
            return lambda g, ans, a, b: g * a
        return super().vjp_rule(op, i)


class NoMulEngine(BuiltinEngine):
    """Every op but mul: the engine says so by raising NotImplementedError."""

    def mul(self, a, b):
        raise NotImplementedError("mul is not written yet")


def test_a_correct_engine_passes():
    result = gradcheck.check(MUL_SUM, INPUTS, cotangent="random")
    assert result.passed, result
    assert result.status == "passed"
    assert list(result.inputs) == ["x", "y"]
    assert result.inputs["x"].status == "passed"
    assert result.inputs["x"].max_abs_diff == pytest.approx(0.0, abs=1e-12)
    assert result.inputs["y"].reference_shape == (2, 3)
    assert result.hints == []
    assert str(result).startswith("PASSED")
    assert isinstance(result, gradcheck.CheckResult)


def test_a_broken_engine_class_fails_with_the_fault_named():
    result = gradcheck.check(MUL_SUM, INPUTS, WrongMulEngine, cotangent="random")
    assert not result.passed
    assert result.status == "failed"
    assert result.hints[0].code == "fault:mul.self"
    assert result.hints[0].confidence == "exact"
    x, y = result.inputs["x"], result.inputs["y"]
    assert x.status == "failed" and not x.passed
    assert x.max_abs_diff > 0 and x.mismatched > 0 and x.size == 6
    assert x.reference.shape == x.engine.shape == (2, 3)
    assert y.passed
    text = str(result)
    assert "FAILED" in text and "fault:mul.self" in text
    assert "fault:mul.self" in repr(result)


def test_a_factory_and_a_spec_string_name_engines_too():
    fault = FAULTS["matmul.full-transpose"]
    seed = {
        "x": [[[1.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]],
        "y": [[3.0, -7.0], [-1.0, 5.0]],
        "z": [[[1, 1], [2.0, 2]], [[3, 3], [-1, -1]]],
    }
    result = gradcheck.check(
        "matmul(matmul(x, y), z)", seed, lambda: FaultyEngine(fault), dtype="float32"
    )
    assert result.hints[0].code == "fault:matmul.full-transpose"
    tiny = gradcheck.check("sum(exp(x) * y)", INPUTS, str(ROOT / "examples" / "tiny_engine.py"))
    assert tiny.passed, tiny


def test_inputs_may_be_numpy_arrays_and_options_are_case_keys():
    x = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
    result = gradcheck.check(
        "mean(tanh(x) * w)",
        {"x": x, "w": np.float32(2.0)},
        dtype="float32",
        wrt=["x"],
        tolerance={"rtol": 1e-5},
        name="tanh_mean",
    )
    assert result.passed, result
    assert list(result.inputs) == ["x"]
    assert result.name == "tanh_mean"
    assert "test_api.py:" in result.location  # the call site: there is no case file


@pytest.mark.parametrize(
    ("options", "inputs", "message"),
    [
        ({"tolerence": {"rtol": 1e-3}}, INPUTS, "did you mean 'tolerance'"),
        ({"dtype": "float8"}, INPUTS, "dtype 'float8' is not supported"),
        ({"wrt": ["q"]}, INPUTS, "wrt names 'q'"),
        ({"cotangent": [1.0, 2.0, 3.0]}, INPUTS, "cotangent has shape (3,)"),
        ({}, {"x": {"shape": [2, 3]}, "y": {"shape": [3, 2]}}, "x * y"),
        ({}, {"x": {"shape": [2, 3]}, "y": [[1.0, 2.0], [3.0]]}, "ragged"),
        ({}, {"x": {"shape": [2, 3]}}, "'y'"),
        ({"name": "has space"}, INPUTS, "name 'has space'"),
    ],
)
def test_a_bad_case_raises_a_gradcheck_error_saying_what_to_change(options, inputs, message):
    with pytest.raises(gradcheck.InvalidCaseError) as raised:
        gradcheck.check(MUL_SUM, inputs, **options)
    assert message in str(raised.value)
    assert isinstance(raised.value, GradcheckError)
    assert raised.value.file.endswith("test_api.py")


def test_a_bad_engine_raises_a_usage_error():
    with pytest.raises(UsageError, match="pass the class"):
        gradcheck.check(MUL_SUM, INPUTS, BuiltinEngine())
    with pytest.raises(UsageError, match="no grad"):
        gradcheck.check(MUL_SUM, INPUTS, type("Half", (), {"leaf": print, "value": print}))
    with pytest.raises(UsageError, match="no such file"):
        gradcheck.check(MUL_SUM, INPUTS, "nowhere/engine.py")


def test_an_unsupported_check_is_skipped_and_did_not_pass():
    result = gradcheck.check(MUL_SUM, INPUTS, NoMulEngine)
    assert result.status == "skipped"
    assert not result.passed
    assert "mul is not written yet" in result.message
    assert "SKIPPED" in str(result)


def test_run_over_the_shipped_cases_passes():
    report = gradcheck.run(ROOT / "cases")
    assert report.passed, report
    assert report.exit_code == 0
    assert len(report.cases) == len(report) > 20
    assert all(c.passed for c in report.cases)
    assert report.summary["passed"] == len(report)
    text = str(report)
    assert text.count("PASSED") == len(report)
    assert text.rstrip().splitlines()[-1].startswith(f"{len(report)} passed in ")


def test_run_takes_the_command_line_options(tmp_path):
    report = gradcheck.run(
        [ROOT / "cases" / "seed.yaml"], str(ROOT / "examples" / "seed_engine.py"), keyword="seed"
    )
    assert not report.passed and report.exit_code == 1
    assert report.cases[0].hints[0].code == "fault:matmul.full-transpose"
    assert "1 failed" in str(report)
    (tmp_path / "bad.yaml").write_text("cases:\n  - name: bad\n    expr: x\n")
    invalid = gradcheck.run(tmp_path)
    assert invalid.exit_code == 2 and invalid.cases[0].status == "invalid"
    with pytest.raises(GradcheckError, match="no such file"):
        gradcheck.run(tmp_path / "missing.yaml")


def test_the_stale_check_limit_is_an_option_of_check_and_run():
    inputs = {"x": [1.0, 2.0], "y": [3.0, 4.0]}  # 4 input elements
    twice = gradcheck.check("x * y", inputs, E.Accumulating)
    assert not twice.passed and twice.hints[0].code == "stale-gradients"
    once = gradcheck.check("x * y", inputs, E.Accumulating, stale_check_limit=3)
    assert once.passed and "asked for once" in once.message
    seed = ROOT / "cases" / "seed.yaml"
    assert not gradcheck.run(seed, E.Accumulating, stale_check_limit=None).passed
    assert gradcheck.run(seed, E.Accumulating, stale_check_limit=1).passed


def test_importing_gradcheck_imports_nothing_heavy():
    code = (
        "import sys, gradcheck; "
        "print(sorted(m for m in ('numpy', 'tensorflow', 'yaml', 'rich') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# -- where the engine runs -------------------------------------------------------------

HOSTILE = str(Path(__file__).resolve().parent / "hostile_engine.py")


class ExitingEngine(BuiltinEngine):
    def grad(self, output, wrt, cotangent):
        sys.exit(3)


def test_an_engine_calling_sys_exit_in_this_process_is_an_error_not_an_exit():
    result = gradcheck.check("sum(x * x)", {"x": [1.0, 2.0]}, engine=ExitingEngine)
    assert result.status == "error" and "sys.exit(3)" in result.message


def test_a_spec_string_runs_in_a_worker_so_its_crash_is_an_error_here():
    result = gradcheck.check("sum(segv * 2.0)", {"segv": [1.0, 2.0]}, engine=HOSTILE)
    assert result.status == "error"
    assert "the engine process was killed by SIGSEGV during grad()" in result.message


def test_a_class_runs_in_a_worker_when_asked_and_importable(tmp_path):
    report = gradcheck.run(
        ROOT / "cases" / "seed.yaml", engine=BuiltinEngine, isolate="process", timeout=30
    )
    assert report.passed and report.engine == "builtin"
    with pytest.raises(gradcheck.GradcheckError, match="cannot run in a worker"):
        gradcheck.check("x * 2.0", {"x": [1.0]}, engine=lambda: BuiltinEngine(), isolate="process")
    with pytest.raises(gradcheck.GradcheckError, match="isolate must be"):
        gradcheck.check("x * 2.0", {"x": [1.0]}, isolate="thread")
