"""Engines that break the adapter protocol (SPEC §4), and `--engine` resolution.

Every misbehaving engine is run through `runner.run` against the real TensorFlow
reference: the case it breaks is reported (`error`, `skipped`, `failed`) with a message
that says why, and the run goes on.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import engines_for_tests as E
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.driver import as_array
from gradcheck.engines.loading import load_engine
from gradcheck.errors import UsageError
from gradcheck.runner import RunOptions, run

TINY = """\
    cases:
      - name: tiny
        expr: |
          h = x * y
          sin(h) + x
        inputs:
          x: [0.5, -1.0, 2.0]
          y: [1.5, 0.25, -0.75]
"""

WITH_INTERMEDIATE = """\
    cases:
      - name: tiny_wrt_h
        expr: |
          h = x * y
          sin(h) + x
        inputs:
          x: [0.5, -1.0, 2.0]
          y: [1.5, 0.25, -0.75]
        wrt: [x, h]
"""

THREE = """\
    cases:
      - name: first_sin
        expr: sin(x) * x
        inputs: {x: [0.5, 1.0]}
      - name: second_exp
        expr: exp(x) + x
        inputs: {x: [0.5, 1.0]}
      - name: third_mul
        expr: x * x
        inputs: {x: [0.5, 1.0]}
"""


@pytest.fixture
def tiny(tmp_path):
    return E.load_cases(tmp_path, TINY)


def only(result):
    (case,) = result.cases
    return case


# -- the engine raises or returns something that is not a gradient ----------------------


def test_correct_engine_passes(tiny):
    case = only(run(tiny, BuiltinEngine))
    assert case.status == "passed", case.message
    assert [i.name for i in case.inputs] == ["x", "y"]


def test_grad_raising_is_an_error_with_the_engines_traceback(tiny):
    result = run(tiny, E.RaisingGrad)
    case = only(result)
    assert case.status == "error"
    assert "ValueError" in case.message and "boom in grad" in case.message
    assert case.traceback is not None
    assert "engines_for_tests.py" in case.traceback
    assert "_explode" in case.traceback and "in grad" in case.traceback
    for internal in ("driver.py", "runner.py", "src/gradcheck"):
        assert internal not in case.traceback
    assert result.exit_code == 1


@pytest.mark.parametrize(
    ("engine", "fragments"),
    [
        (E.NoneGrad, ["grad returned NoneType", "expected a list of 2 arrays"]),
        (E.NoneElementGrad, ["grad for x returned None"]),
        (E.WrongCountGrad, ["grad returned 1 array for 2 wrt nodes", "x, y"]),
        (E.StringGrad, ["grad for x returned str", "not a numeric array"]),
        (E.ObjectGrad, ["grad for x returned object", "not a numeric array"]),
        (E.RaggedGrad, ["grad for x returned list", "not a numeric array"]),
    ],
)
def test_bad_grad_results_are_errors_naming_the_problem(tiny, engine, fragments):
    case = only(run(tiny, engine))
    assert case.status == "error", case.message
    for fragment in fragments:
        assert fragment in case.message


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (np.ones(3, np.float32), np.float32),  # a float dtype is kept: compare upcasts
        (np.ones(3, np.float16), np.float16),
        ([1, 2, 3], np.float64),  # lists, integers and booleans become float64
        (np.array([True, False]), np.float64),
        (np.array([1.5], dtype=object), np.float64),
    ],
)
def test_engine_results_become_float_arrays(value, dtype):
    array = as_array(value, "grad for x")
    assert array.dtype == dtype
    np.testing.assert_array_equal(array, np.asarray(value, dtype=np.float64))


def test_engine_results_are_copied():
    mine = np.ones(3, np.float32)
    array = as_array(mine, "grad for x")
    mine[:] = 5.0  # an engine reusing its buffer must not change what was recorded
    assert (array == 1.0).all()


def test_value_raising_is_an_error(tiny):
    case = only(run(tiny, E.RaisingValue))
    assert case.status == "error"
    assert "value" in case.message and "boom in value" in case.message
    assert "engines_for_tests.py" in case.traceback


def test_constructor_raising_is_an_error(tiny):
    case = only(run(tiny, E.RaisingConstructor))
    assert case.status == "error"
    assert "creating the engine raised ValueError: boom in __init__" in case.message
    assert case.traceback is not None and "engines_for_tests.py" in case.traceback


def test_wrongly_shaped_gradients_fail_with_the_shapes_shown(tiny):
    case = only(run(tiny, E.WrongShapeGrad))
    assert case.status == "failed"
    for item in case.inputs:
        assert item.comparison.reference_shape == (3,)
        assert item.comparison.engine_shape == (3, 1)
        assert item.comparison.max_abs_diff is None


def test_unexpected_exception_from_the_engine_is_an_error_not_a_crash(tiny):
    result = run([*tiny, *tiny], E.UnconvertibleValue)
    assert [c.status for c in result.cases] == ["error", "error"]
    message = result.cases[0].message
    assert "RuntimeError" in message and "cannot be an array" in message
    assert "creating the engine" not in message
    assert "engines_for_tests.py" in result.cases[0].traceback


# -- unsupported ops ---------------------------------------------------------------------


def test_missing_op_is_skipped_with_the_op_named(tiny):
    result = run(tiny, E.MulAddOnly)
    case = only(result)
    assert case.status == "skipped"
    assert "sin" in case.message and "unsupported" in case.message
    assert result.exit_code == 0


def test_missing_op_fails_when_strict(tiny):
    result = run(tiny, E.MulAddOnly, RunOptions(strict=True))
    case = only(result)
    assert case.status == "failed"
    assert "sin" in case.message
    assert result.exit_code == 1


def test_supported_case_still_runs_on_a_partial_engine(tmp_path):
    cases = E.load_cases(
        tmp_path,
        """\
        cases:
          - name: mul_add
            expr: x * y + x
            inputs: {x: [1.0, 2.0], y: [3.0, 4.0]}
        """,
    )
    case = only(run(cases, E.MulAddOnly))
    assert case.status == "passed", case.message


def test_engine_without_constant_gets_literals_as_leaves(tmp_path):
    cases = E.load_cases(
        tmp_path,
        """\
        cases:
          - name: literal_and_constant_input
            expr: x * 2.5 + y
            inputs: {x: [1.0, 2.0], y: [3.0, 4.0]}
            wrt: [x]
            cotangent: ones
        """,
    )
    case = only(run(cases, E.NoConstant))
    assert case.status == "passed", case.message
    assert [i.name for i in case.inputs] == ["x"]
    np.testing.assert_array_equal(case.inputs[0].comparison.engine, [2.5, 2.5])


# -- intermediate nodes, stale gradients, mutated inputs ----------------------------------


def test_engine_refusing_intermediate_wrt_still_compares_the_inputs(tmp_path):
    cases = E.load_cases(tmp_path, WITH_INTERMEDIATE)
    case = only(run(cases, E.LeavesOnly))
    assert case.status == "passed", case.message
    assert [i.name for i in case.inputs] == ["x"]
    assert case.inputs[0].comparison.max_abs_diff < 1e-12
    assert "intermediate" in case.message and "only leaves" in case.message
    # The builtin engine answers for h too.
    full = only(run(cases, BuiltinEngine))
    assert [i.name for i in full.inputs] == ["x", "h"] and full.status == "passed"


def test_gradients_that_change_when_asked_again_are_stale(tiny):
    case = only(run(tiny, E.Accumulating))
    assert case.status == "failed"
    # The first answer was right; only asking twice shows the accumulation.
    assert all(i.comparison.passed for i in case.inputs)
    assert case.forward.passed
    assert case.hints and case.hints[0].code == "stale-gradients"
    assert "x" in case.hints[0].message


def test_cases_over_the_stale_check_limit_ask_once(tiny):
    # x and y hold 6 elements: at a limit of 6 the case is asked twice, at 5 once.
    at_limit = only(run(tiny, E.Accumulating, RunOptions(stale_check_limit=6)))
    assert at_limit.status == "failed" and at_limit.hints[0].code == "stale-gradients"
    over = only(run(tiny, E.Accumulating, RunOptions(stale_check_limit=5)))
    assert over.status == "passed"
    assert "asked for once: 6 input elements" in over.message
    every = only(run(tiny, E.Accumulating, RunOptions(stale_check_limit=None)))
    assert every.status == "failed"


def test_engine_writing_into_its_inputs_corrupts_nothing(tiny):
    (case,) = tiny
    before = {name: value.copy() for name, value in case.inputs.items()}
    first = only(run(tiny, E.MutatesInputs))
    assert first.status == "passed", first.message
    for name, value in before.items():
        np.testing.assert_array_equal(case.inputs[name], value)
    x, y, g = before["x"], before["y"], case.cotangent
    np.testing.assert_allclose(first.forward.reference, np.sin(x * y) + x, rtol=1e-12)
    np.testing.assert_allclose(
        first.inputs[0].comparison.reference, (np.cos(x * y) * y + 1) * g, rtol=1e-12
    )
    second = only(run(tiny, BuiltinEngine))
    np.testing.assert_array_equal(second.forward.reference, first.forward.reference)
    assert second.status == "passed"


# -- one case's trouble never stops the others --------------------------------------------


def test_an_erroring_case_does_not_stop_the_next(tmp_path):
    cases = E.load_cases(tmp_path, THREE)
    result = run(cases, E.ExpRaises)
    assert [c.status for c in result.cases] == ["passed", "error", "passed"]
    assert "boom in exp" in result.cases[1].message
    assert result.exit_code == 1


def test_fail_fast_stops_after_the_first_failure(tmp_path):
    cases = E.load_cases(tmp_path, THREE)
    everything = run(cases, E.WrongExp, RunOptions(diagnose=False))
    assert [c.status for c in everything.cases] == ["passed", "failed", "passed"]
    stopped = run(cases, E.WrongExp, RunOptions(fail_fast=True, diagnose=False))
    assert [c.status for c in stopped.cases] == ["passed", "failed", "not run"]
    assert stopped.fail_fast and stopped.exit_code == 1
    errored = run(cases, E.ExpRaises, RunOptions(fail_fast=True))
    assert [c.status for c in errored.cases] == ["passed", "error", "not run"]
    last = run(cases[:2], E.WrongExp, RunOptions(fail_fast=True, diagnose=False))
    assert not last.fail_fast  # the failure was the last case: nothing left out


# -- load_engine -------------------------------------------------------------------------

ENGINE_SOURCE = """\
from gradcheck.engines.builtin import BuiltinEngine


class Engine(BuiltinEngine):
    name = "tmp-default"


class Other(BuiltinEngine):
    name = "tmp-other"


class Helper:
    pass
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def usable(factory) -> None:
    """The class makes an engine that differentiates."""
    engine = factory()
    x = engine.leaf("x", np.array([1.0, 2.0]))
    (g,) = engine.grad(engine.mul(x, x), [x], np.ones(2))
    np.testing.assert_array_equal(g, [2.0, 4.0])


def test_load_builtin():
    assert load_engine("builtin") is BuiltinEngine


def test_load_file_with_and_without_class(tmp_path):
    path = write(tmp_path / "my_engine.py", ENGINE_SOURCE)
    default = load_engine(str(path))
    assert default.__name__ == "Engine" and default.name == "tmp-default"
    other = load_engine(f"{path}:Other")
    assert other.name == "tmp-other"
    usable(default)
    usable(other)


def test_load_test_support_file_by_path():
    factory = load_engine(f"{E.FILE}:Accumulating")
    assert factory.__name__ == "Accumulating"
    assert load_engine(str(E.FILE)).name == "tests-default"


def test_load_module_by_dotted_name(tmp_path, monkeypatch):
    write(tmp_path / "gc_pkg_for_tests" / "__init__.py", "")
    write(tmp_path / "gc_pkg_for_tests" / "engines.py", ENGINE_SOURCE)
    write(tmp_path / "gc_module_for_tests.py", ENGINE_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ("gc_pkg_for_tests", "gc_pkg_for_tests.engines", "gc_module_for_tests")
    try:
        assert load_engine("gc_pkg_for_tests.engines:Other").name == "tmp-other"
        assert load_engine("gc_module_for_tests").name == "tmp-default"
        usable(load_engine("gc_module_for_tests:Engine"))
    finally:
        for name in names:
            sys.modules.pop(name, None)


def test_load_test_support_module_by_name(monkeypatch):
    monkeypatch.syspath_prepend(str(E.FILE.parent))
    assert load_engine("engines_for_tests:LeavesOnly") is E.LeavesOnly
    assert load_engine("engines_for_tests") is E.Engine


def test_load_missing_file(tmp_path):
    with pytest.raises(UsageError, match="no such file") as info:
        load_engine(f"{tmp_path / 'nope.py'}:Engine")
    assert "nope.py" in str(info.value)


def test_load_missing_class_lists_the_classes_there(tmp_path):
    path = write(tmp_path / "my_engine.py", ENGINE_SOURCE)
    with pytest.raises(UsageError) as info:
        load_engine(f"{path}:Missing")
    message = str(info.value)
    assert "'Missing'" in message
    assert "Engine, Other, Helper" in message
    assert "BuiltinEngine" not in message  # imported, not defined there


def test_load_missing_default_class(tmp_path):
    path = write(tmp_path / "no_default.py", "class Mine:\n    pass\n")
    with pytest.raises(UsageError, match=r"no class 'Engine' \(classes there: Mine\)"):
        load_engine(str(path))


def test_load_class_without_grad():
    with pytest.raises(UsageError, match=r"NoGrad has no grad\(\) method"):
        load_engine(f"{E.FILE}:NoGrad")


@pytest.mark.parametrize("by", ["file", "module"])
def test_load_module_that_raises_on_import(tmp_path, monkeypatch, by):
    write(tmp_path / "gc_broken_for_tests.py", "raise RuntimeError('engine import exploded')\n")
    monkeypatch.chdir(tmp_path)  # the file is named relative to the working directory
    if by == "file":
        spec = str(tmp_path / "gc_broken_for_tests.py")
    else:
        monkeypatch.syspath_prepend(str(tmp_path))
        spec = "gc_broken_for_tests"
    with pytest.raises(UsageError) as info:
        load_engine(spec)
    message = str(info.value)
    assert message.startswith("gc_broken_for_tests.py:1: RuntimeError: engine import exploded")
    assert "could not be imported" in message
    assert "gc_broken_for_tests" not in sys.modules
    assert "gradcheck_engine_gc_broken_for_tests" not in sys.modules


def test_load_missing_module():
    with pytest.raises(UsageError, match="cannot import module 'gc_no_such_module_xyz'"):
        load_engine("gc_no_such_module_xyz:Engine")


# -- TensorFlow stays unimported until a reference is needed -------------------------------


@pytest.mark.parametrize(
    "module", ["gradcheck.cli", "gradcheck.ops", "gradcheck.cases", "gradcheck.engines.loading"]
)
def test_import_does_not_load_tensorflow(module):
    code = f"import {module}, sys; assert 'tensorflow' not in sys.modules, 'tensorflow loaded'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
