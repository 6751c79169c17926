"""Dtypes (SPEC §4): the engine's result dtype is recorded; an engine that computes in a
lower precision than the case asks is told so, with the cause in its own library; and
float16/bfloat16 cases run end to end, judged against the exact answer for the same
rounded inputs, through diagnosis without a dropped step.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from engines_for_tests import load_cases
from gradcheck.cases import load_file
from gradcheck.comparison.compare import ERROR_FACTOR, compare
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.diagnosis.mechanisms import dtypes
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.reverse import run_engine
from gradcheck.references.tensorflow import TensorFlowEngine
from gradcheck.report.json_report import to_json
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "corpus"))

from tape_engine import Engine as TapeEngine  # noqa: E402
from tfop_engine import Engine as TfOpEngine  # noqa: E402


class TapeFloat32(TapeEngine):
    """A correct NumPy engine that casts every input to float32."""

    def leaf(self, name, value):
        return super().leaf(name, np.asarray(value, np.float32))

    def constant(self, value):
        return super().constant(np.asarray(value, np.float32))


class TfOpFloat32(TfOpEngine):
    """A correct TF-op engine whose tensors are float32 whatever the case's dtype."""

    def leaf(self, name, value):
        return super().leaf(name, np.asarray(value, np.float32))

    def constant(self, value):
        return super().constant(np.asarray(value, np.float32))


FLOAT64_CASE = """
cases:
  - name: mlp_layer
    dtype: float64
    cotangent: random
    expr: sum(tanh(x @ w) * y, axis=1)
    inputs:
      x: {shape: [8, 32], init: normal}
      w: {shape: [32, 16], init: uniform, low: -0.3, high: 0.3}
      y: {shape: [8, 16], init: normal}
"""


@pytest.mark.parametrize(
    ("factory", "says"),
    [(TapeFloat32, "np.float32"), (TfOpFloat32, "tf.constant(value")],
    ids=["numpy", "tensorflow"],
)
def test_a_float32_engine_on_a_float64_case_gets_precision_naming_the_cause(
    tmp_path, factory, says
):
    [result] = run(load_cases(tmp_path, FLOAT64_CASE), factory, RunOptions()).cases
    assert result.status == "failed"
    assert result.engine_dtype == "float32"
    codes = {h.code for h in result.hints}
    assert codes == {"precision"}, [(h.code, h.message) for h in result.hints]
    assert "forward-mismatch" not in codes and "backprop-driver" not in codes
    assert result.nodes == []  # rounding: nothing to localise
    top = result.hints[0]
    assert "the engine returns float32 on a float64 case: it computes in float32" in top.message
    assert "ulps of float32" in top.message
    assert says in top.fix


def test_the_cause_is_named_in_the_engines_library():
    what, jax = dtypes.cause("float32", "float64", frozenset({"jax", "numpy"}))
    assert what == "the engine returns float32 on a float64 case: it computes in float32"
    assert "jax.config.update('jax_enable_x64', True)" in jax
    _, torch = dtypes.cause("float32", "float64", frozenset({"torch"}))
    assert "torch.set_default_dtype(torch.float64)" in torch
    assert "np.float32" in dtypes.cause("float32", "float64", frozenset())[1]


def test_a_real_bug_in_a_float32_engine_is_still_a_bug(tmp_path):
    class Float32SinSign(TapeFloat32):
        def _vjp_tanh(self, g, out, x):
            return (-g * (1 - out * out),)

    [result] = run(load_cases(tmp_path, FLOAT64_CASE), Float32SinSign, RunOptions()).cases
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "tanh", "sign-flip")


def test_the_engines_dtype_is_recorded_and_reported(tmp_path):
    cases = load_cases(tmp_path, FLOAT64_CASE)
    report = json.loads(to_json(run(cases, TapeFloat32, RunOptions()), tool_version="t"))
    assert report["cases"][0]["engine_dtype"] == "float32"
    [passed] = run(cases, BuiltinEngine, RunOptions()).cases
    assert passed.engine_dtype == "float64"


# -- float16 and bfloat16 ------------------------------------------------------------------


def low_precision_cases() -> dict:
    return {c.name: c for c in load_file(ROOT / "cases" / "low_precision.yaml")}


def test_two_correct_engines_disagree_in_bfloat16_beyond_the_plain_tolerance():
    """The problem the rule solves: builtin and TensorFlow each round at every op."""
    case = low_precision_cases()["bf16_tanh_layer"]
    args = (case.expression, case.inputs, case.wrt, case.cotangent)
    tf, ours = run_engine(TensorFlowEngine(), *args), run_engine(BuiltinEngine(), *args)
    assert ours.dtype == "bfloat16"
    plain = [compare(tf.grads[n], ours.grads[n], case.tolerance).passed for n in case.wrt]
    assert not all(plain)
    wide = {n: v.astype(np.float64) for n, v in case.inputs.items()}
    exact = run_engine(TensorFlowEngine(), case.expression, wide, case.wrt,
                       case.cotangent.astype(np.float64))  # fmt: skip
    for name in case.wrt:
        judged = compare(tf.grads[name], ours.grads[name], case.tolerance, exact.grads[name])
        assert judged.passed, name
        tf_error = np.max(np.abs(tf.grads[name].astype(np.float64) - exact.grads[name]))
        our_error = np.max(np.abs(ours.grads[name].astype(np.float64) - exact.grads[name]))
        assert our_error <= ERROR_FACTOR * tf_error + case.tolerance.atol


def test_every_low_precision_case_passes_the_builtin_engine():
    result = run(list(low_precision_cases().values()), BuiltinEngine, RunOptions())
    assert [c.status for c in result.cases] == ["passed"] * len(result.cases)
    assert all(c.hints == [] for c in result.cases)


def test_an_engine_a_few_times_worse_than_tensorflow_fails(tmp_path):
    """Within ERROR_FACTOR of TensorFlow's own error passes; well beyond it does not."""

    class Off(BuiltinEngine):
        def grad(self, output, wrt, cotangent):
            grads = super().grad(output, wrt, cotangent)
            return [np.asarray(g) * np.asarray(1.06, g.dtype) for g in grads]

    [result] = run([low_precision_cases()["bf16_tanh_layer"]], Off, RunOptions()).cases
    assert result.status == "failed"
    assert result.message == ""


def test_a_tolerance_of_its_own_replaces_the_low_precision_rule(tmp_path):
    text = (ROOT / "cases" / "low_precision.yaml").read_text()
    tight = text.replace(
        "    tags: [bfloat16, matmul, tanh]",
        "    tolerance: {rtol: 0.001, atol: 0.00001}\n    tags: [bfloat16, matmul, tanh]",
    )
    path = tmp_path / "tight.yaml"
    path.write_text(tight)
    case = next(c for c in load_file(path) if c.name == "bf16_tanh_layer")
    assert case.tolerance_given
    [result] = run([case], BuiltinEngine, RunOptions()).cases
    assert result.status == "failed"  # judged by the tolerance alone, as asked


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize(
    ("expr", "factory", "top"),
    [
        ("sigmoid(x) * y", lambda: FaultyEngine(FAULTS["sigmoid.from-input"]),
         ("fault:sigmoid.from-input", None)),
        ("tanh(x) * y", lambda: FaultyEngine(FAULTS["tanh.from-input"]),
         ("fault:tanh.from-input", None)),
        ("cos(x) * y", lambda: FaultyEngine(FAULTS["cos.sign"]), ("fault:cos.sign", None)),
    ],
    ids=["sigmoid", "tanh", "cos"],
)  # fmt: skip
def test_low_precision_diagnosis_runs_every_step(tmp_path, dtype, expr, factory, top):
    text = f"""
    cases:
      - name: c
        dtype: {dtype}
        cotangent: random
        expr: {expr}
        inputs:
          x: {{shape: [3, 4], init: normal}}
          y: {{shape: [3, 4], init: normal}}
    """
    [result] = run(load_cases(tmp_path, text), factory, RunOptions()).cases
    assert result.status == "failed"
    assert result.message == "", result.message  # no step dropped
    assert (result.hints[0].code, result.hints[0].mechanism) == top
    assert result.nodes and all(n.status in ("passed", "failed") for n in result.nodes)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_mechanisms_are_probed(tmp_path, dtype):
    class ExpIgnores(BuiltinEngine):
        def vjp_rule(self, op, i):
            if op.name == "exp":
                return lambda g, ans, x: ans
            return super().vjp_rule(op, i)

    text = f"""
    cases:
      - name: c
        dtype: {dtype}
        cotangent: random
        expr: exp(x) * y
        inputs:
          x: {{shape: [3, 4], init: normal}}
          y: {{shape: [3, 4], init: normal}}
    """
    [result] = run(load_cases(tmp_path, text), ExpIgnores, RunOptions()).cases
    assert result.message == ""
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "exp", "ignores-upstream")


def test_precision_in_bfloat16_uses_bfloat16s_epsilon(tmp_path):
    """np.finfo(bfloat16) raised in the pattern step before; ml_dtypes knows it."""

    class Up(BuiltinEngine):
        def grad(self, output, wrt, cotangent):
            grads = super().grad(output, wrt, cotangent)
            return [g + (np.abs(g) * np.asarray(0.01, g.dtype)).astype(g.dtype) for g in grads]

    text = """
    cases:
      - name: c
        dtype: bfloat16
        cotangent: random
        tolerance: {rtol: 0.0, atol: 0.0}
        expr: x * y
        inputs:
          x: {shape: [2, 3], init: normal}
          y: {shape: [2, 3], init: normal}
    """
    [result] = run(load_cases(tmp_path, text), Up, RunOptions()).cases
    assert result.status == "failed"
    assert result.message == ""
    assert result.hints[0].code == "precision"
    assert "ulps of bfloat16" in result.hints[0].message


def test_a_run_without_bfloat16_never_imports_ml_dtypes():
    """ml_dtypes' import takes seconds here: a run whose cases are NumPy's own floats does
    not pay it (the dtype the engine returned is judged with NumPy's `finfo`)."""
    import subprocess

    code = (
        "import sys, gradcheck\n"
        "report = gradcheck.run(['cases/seed.yaml'], engine='builtin', reference='numeric',"
        " cache=False, isolate='none')\n"
        "assert report.passed, report\n"
        "assert report.cases[0].engine_dtype == 'float32', report.cases[0].engine_dtype\n"
        "assert 'ml_dtypes' not in sys.modules, 'ml_dtypes imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_machine_epsilon_of_every_case_dtype():
    from gradcheck.cases.dtypes import machine_epsilon

    assert [machine_epsilon(d) for d in ("float16", "bfloat16", "float32", "float64")] == [
        2.0**-10, 2.0**-7, 2.0**-23, 2.0**-52,
    ]  # fmt: skip
