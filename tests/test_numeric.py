"""The numeric reference (SPEC §8): central finite differences of the registry's NumPy
forward, its error bound, what it refuses to judge, `--reference both`, and a machine
without TensorFlow."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import Case, load_file, load_paths
from gradcheck.cases.model import Tolerance
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.reverse import run_engine
from gradcheck.expression import parse
from gradcheck.ops.user import load_ops_files
from gradcheck.references import numeric
from gradcheck.references.cache import ReferenceCache
from gradcheck.report import to_dict
from gradcheck.runner import RunOptions, check_case, reference_run, run
from without_tensorflow import NO_TENSORFLOW, WRAPPER

ROOT = Path(__file__).resolve().parents[1]
F64 = Tolerance(1e-7, 1e-7)


def fd(expr: str, inputs: dict[str, np.ndarray], cotangent=None, tolerance=F64, wrt=None):
    values = {k: np.asarray(v, np.float64) for k, v in inputs.items()}
    expression = parse(expr, {k: v.shape for k, v in values.items()})
    shape = expression.output.shape
    cot = np.ones(shape) if cotangent is None else np.asarray(cotangent, np.float64)
    return numeric.numeric_run(expression, values, wrt or list(values), cot, tolerance)


def load(tmp_path: Path, text: str) -> list[Case]:
    path = tmp_path / "cases.yaml"
    path.write_text(textwrap.dedent(text))
    items = load_file(path)
    assert all(isinstance(i, Case) for i in items), items
    return items  # type: ignore[return-value]


def shipped() -> list[Case]:
    return [c for c in load_paths([ROOT / "cases"]) if isinstance(c, Case)]


# --- the guard: TensorFlow and finite differences agree on the shipped suite --------------


def test_tensorflow_and_finite_differences_agree_on_every_shipped_case() -> None:
    """Guards both oracles at once: the builtin engine against each, and each against the
    other (a `reference-disagreement` on any shipped case would fail here)."""
    cases = shipped()
    result = run(cases, BuiltinEngine, RunOptions(reference="both"))
    assert [(c.name, c.status) for c in result.cases] == [(c.name, "passed") for c in cases], [
        (c.name, c.message) for c in result.cases if c.status != "passed"
    ]
    assert not [h for c in result.cases for h in c.hints]
    assert result.reference.startswith("tensorflow ") and result.reference.endswith(
        " + " + numeric.LABEL
    )


def test_the_kink_cases_are_judged_by_tensorflows_convention() -> None:
    """At a kink or tie the numeric reference takes the registry's subgradient, which the
    builtin engine shares and TensorFlow's (the guard above) agrees with."""
    noted = 0
    for case in shipped():
        if "kink" not in case.tags:
            continue
        reference = numeric.numeric_reference(case)
        noted += any("sit at a kink or tie" in note for note in reference.notes)
        assert not any(mask.any() for mask in reference.untrusted.values())
        want = run_engine(BuiltinEngine(), case.expression, case.inputs, case.wrt, case.cotangent)
        for name in case.wrt:
            np.testing.assert_allclose(
                reference.grads[name], want.grads[name], rtol=1e-5, atol=1e-5
            )
    assert noted >= 8  # maximum(x, 0) + minimum(0, x) is x: smooth, nothing to note there


# --- the rule and its bound --------------------------------------------------------------


SMOOTH = [
    ("exp(x) * 3.0", lambda x: 3 * np.exp(x), {"low": -3, "high": 3}),
    ("sin(x) * x", lambda x: np.cos(x) * x + np.sin(x), {"low": -4, "high": 4}),
    ("log(x)", lambda x: 1 / x, {"low": 0.05, "high": 5}),
    ("1.0 / x", lambda x: -1 / x**2, {"low": 0.2, "high": 3}),
    ("x ** 3", lambda x: 3 * x**2, {"low": -50, "high": 50}),
    ("tanh(x * 4.0)", lambda x: 4 * (1 - np.tanh(4 * x) ** 2), {"low": -2, "high": 2}),
]


@pytest.mark.parametrize(("expr", "derivative", "span"), SMOOTH, ids=[s[0] for s in SMOOTH])
def test_the_error_stays_within_its_bound(expr, derivative, span) -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(span["low"], span["high"], (4, 6))
    cotangent = rng.standard_normal(x.shape)
    got = fd(expr, {"x": x}, cotangent)
    exact = derivative(x) * cotangent
    error = np.abs(got.grads["x"] - exact)
    assert not got.untrusted["x"].any() and not got.notes
    assert error.max() <= got.slack["x"] + 1e-13, (error.max(), got.slack["x"])
    # The bound is honest but not vacuous: well inside the float64 tolerance.
    assert got.slack["x"] <= 1e-7 * max(1.0, np.abs(exact).max())


def test_only_the_nodes_downstream_of_a_step_are_recomputed() -> None:
    expression = parse("h = exp(y) @ w\nh * x", {"x": (2, 2), "y": (2, 3), "w": (3, 2)})
    values = {k: np.ones(s) for k, s in (("x", (2, 2)), ("y", (2, 3)), ("w", (3, 2)))}
    program = numeric._Program(expression, values, np.ones((2, 2)))
    assert [n.op.name for n in program.downstream(expression.inputs["x"])] == ["mul"]
    assert [n.op.name for n in program.downstream(expression.inputs["y"])] == [
        "exp",
        "matmul",
        "mul",
    ]


# --- where it cannot judge --------------------------------------------------------------


def test_a_kink_at_the_point_takes_tensorflows_subgradient() -> None:
    got = fd("relu(x) + abs(y) + maximum(x, y)", {"x": [0.0, 1.0, -2.0], "y": [0.0, 0.5, -2.0]})
    np.testing.assert_allclose(got.grads["x"], [1.0, 2.0, 1.0], rtol=1e-9)  # relu'(0)=0, tie to a
    np.testing.assert_allclose(got.grads["y"], [0.0, 1.0, -1.0], rtol=1e-9)  # abs'(0)=0
    assert "x: 2 element(s) sit at a kink or tie (abs, maximum, relu)" in got.notes[0]


def test_a_kink_within_a_step_is_never_misjudged() -> None:
    # 1e-9 from relu's kink, far inside the step of 6e-6: the derivative there is 1.
    got = fd("relu(x - 1e-9) * 2.0", {"x": [0.0, 2e-9, 0.3]})
    np.testing.assert_allclose(got.grads["x"], [0.0, 2.0, 2.0], atol=1e-12)


KINKED_OPS = """
import numpy as np
import gradcheck

@gradcheck.op(shape=gradcheck.same_shape)
def hinge(x):
    \"\"\"max(x, 0) without VJPs: finite differences alone judge it\"\"\"
    return np.maximum(x, 0.0)
"""


def test_a_kink_of_an_op_without_vjps_is_not_judged(tmp_path: Path) -> None:
    path = tmp_path / "kinked_ops.py"
    path.write_text(KINKED_OPS)
    load_ops_files([path])
    got = fd("hinge(x) * 3.0", {"x": [0.0, 1.0, -1.0]})
    assert got.untrusted["x"].tolist() == [True, False, False]
    np.testing.assert_allclose(got.grads["x"][1:], [3.0, 0.0], atol=1e-9)
    assert got.notes == [
        "numeric reference, x: 1 element(s) not judged: at a kink or tie, of an op without "
        "NumPy VJPs"
    ]


def test_overflow_within_a_step_is_not_judged() -> None:
    got = fd("exp(x)", {"x": [709.78, 1.0]})
    assert got.untrusted["x"].tolist() == [True, False]
    assert "overflow or a non-finite value within a step" in got.notes[0]


def test_rounding_that_swamps_the_derivative_is_not_judged() -> None:
    # y changes the terms by 1e-6 where each is 1e12: its ulp, 1e-4, drowns the change.
    got = fd("x * 1e12 + y", {"x": [[1.0, 2.0]], "y": [[0.5, 0.25]]})
    assert got.untrusted["y"].all() and not got.untrusted["x"].any()
    assert any("cannot resolve the derivative" in note for note in got.notes)


def test_a_non_finite_forward_judges_nothing_and_skips_the_case(tmp_path: Path) -> None:
    (case,) = load(
        tmp_path,
        """
        cases:
          - name: log_of_negative
            expr: log(x)
            inputs: {x: [-1.0, 2.0]}
            reference: numeric
        """,
    )
    result = check_case(case, BuiltinEngine)
    assert result.status == "skipped"
    assert "the forward value is not finite" in result.message


class DoublingEngine(BuiltinEngine):
    """Gradients twice too large: what every reference must fail."""

    def grad(self, output, wrt, cotangent):
        with np.errstate(over="ignore"):  # e ** 709.78, doubled
            return [2 * g for g in super().grad(output, wrt, cotangent)]


def test_untrusted_elements_are_left_out_but_the_rest_still_fails(tmp_path: Path) -> None:
    (case,) = load(
        tmp_path,
        """
        cases:
          - name: overflow_beside_a_bug
            expr: exp(x)
            inputs: {x: [709.78, 1.0, 0.5]}
            reference: numeric
        """,
    )
    assert check_case(case, BuiltinEngine).status == "passed"
    wrong = check_case(case, DoublingEngine)
    assert wrong.status == "failed"
    assert wrong.inputs[0].comparison.mismatched == 2  # the overflowing element is not judged
    assert "1 element(s) not judged: overflow" in wrong.message


# --- large inputs: random directions --------------------------------------------------------


def test_a_large_input_is_checked_along_random_directions(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(numeric, "FULL_LIMIT", 8)
    (case,) = load(
        tmp_path,
        """
        cases:
          - name: large
            expr: sum(tanh(x @ w), axis=1)
            inputs: {x: {shape: [5, 4]}, w: {shape: [4, 3]}}
            cotangent: random
            reference: numeric
        """,
    )
    reference = numeric.numeric_reference(case)
    assert (
        "20 elements: the op registry's VJPs, confirmed by finite differences along "
        in " ".join(reference.notes)
    )
    assert check_case(case, BuiltinEngine).status == "passed"
    wrong = check_case(case, DoublingEngine)
    x = wrong.inputs[0]
    assert not x.comparison.passed
    assert any(h.code == "scaled" and h.factor == 2 for h in x.hints)


WRONG_VJP_OPS = """
import numpy as np
import gradcheck

@gradcheck.op(shape=gradcheck.same_shape, vjps=[lambda g, ans, x: g * ans])  # d/dx: 2 e^2x
def exp2(x):
    return np.exp(2 * x)

@gradcheck.op(shape=gradcheck.same_shape)
def cube(x):
    return x ** 3
"""


def test_wrong_numpy_vjps_are_caught_on_a_large_input(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(numeric, "FULL_LIMIT", 8)
    path = tmp_path / "wrong_ops.py"
    path.write_text(WRONG_VJP_OPS)
    load_ops_files([path])
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    got = fd("exp2(x)", {"x": x})
    assert got.untrusted["x"].all()
    assert "the op registry's VJPs give" in got.notes[0] and "not judged" in got.notes[0]
    # Without VJPs, a large input is differenced element by element (up to a limit).
    cubed = fd("cube(x)", {"x": x})
    np.testing.assert_allclose(cubed.grads["x"], 3 * x**2, rtol=1e-9)
    monkeypatch.setattr(numeric, "MAX_EVALUATIONS", 16)
    refused = fd("cube(x)", {"x": x})
    assert refused.untrusted["x"].all() and "too many" in refused.notes[0]


# --- both: the oracle in doubt --------------------------------------------------------------


DISAGREEING_OPS = """
import numpy as np
import gradcheck

@gradcheck.op(
    shape=gradcheck.same_shape,
    vjps=[lambda g, ans, x: g * np.cos(x)],
    tf=lambda tf, x: tf.cos(x),  # not the NumPy forward
)
def wave(x):
    return np.sin(x)

def _tf_twice(tf, x):
    @tf.custom_gradient
    def f(x):
        return tf.square(x), lambda g: g * 4 * x  # d/dx x^2 is 2x, not 4x
    return f(x)

@gradcheck.op(shape=gradcheck.same_shape, vjps=[lambda g, ans, x: 2 * g * x], tf=_tf_twice)
def sq(x):
    return x * x
"""


def test_both_reports_where_tensorflow_and_finite_differences_disagree(tmp_path: Path) -> None:
    path = tmp_path / "disagreeing_ops.py"
    path.write_text(DISAGREEING_OPS)
    load_ops_files([path])
    forward, gradient = load(
        tmp_path,
        """
        defaults: {reference: both}
        cases:
          - name: forward_disagrees
            expr: wave(x)
            inputs: {x: [0.5, 1.0]}
          - name: gradient_disagrees
            expr: sq(x)
            inputs: {x: [0.5, 1.0]}
        """,
    )
    for case, what in ((forward, "forward value"), (gradient, "gradient of x")):
        result = check_case(case, BuiltinEngine)
        assert result.status == "failed"
        top = result.hints[0]
        assert top.code == "reference-disagreement"
        assert (
            f"disagree on the {what}" in top.message and "oracle itself is in doubt" in top.message
        )
    # The builtin engine agrees with the finite differences; TensorFlow is the odd one out.
    alone = dataclasses.replace(gradient, reference=None)
    assert check_case(alone, BuiltinEngine, RunOptions(reference="numeric")).status == "passed"
    assert check_case(alone, BuiltinEngine, RunOptions()).status == "failed"
    # A case's own `reference:` wins over the run's.
    assert check_case(gradient, BuiltinEngine, RunOptions(reference="numeric")).status == "failed"


# --- the case file, the cache, the report ---------------------------------------------------


def test_reference_in_a_case_file(tmp_path: Path) -> None:
    path = tmp_path / "ref.yaml"
    path.write_text(
        "defaults:\n  reference: numeric\ncases:\n"
        "  - name: a\n    expr: x\n    inputs: {x: 1.0}\n"
        "  - name: b\n    expr: x\n    inputs: {x: 1.0}\n    reference: both\n"
        "  - name: c\n    expr: x\n    inputs: {x: 1.0}\n    reference: finite\n"
    )
    a, b, c = load_file(path)
    assert (a.reference, b.reference) == ("numeric", "both")
    assert not isinstance(c, Case) and c.line == 14
    assert "reference 'finite' is not one of tensorflow, numeric, both" in c.message


def test_numeric_references_are_cached_under_their_own_kind(tmp_path: Path) -> None:
    case = next(c for c in shipped() if c.name == "abs_at_zero")
    cache = ReferenceCache(tmp_path / "c")
    assert cache.key(case, "numeric") != cache.key(case, "tensorflow")
    fresh = reference_run(case, RunOptions(cache=cache, reference="numeric"))
    again = ReferenceCache(tmp_path / "c")
    cached = reference_run(case, RunOptions(cache=again, reference="numeric"))
    assert (again.hits, again.misses) == (1, 0)
    assert cache.path(case, "numeric").parent.name == f"numeric-{np.__version__}"
    for name in case.wrt:
        np.testing.assert_array_equal(cached.grads[name], fresh.grads[name])
        np.testing.assert_array_equal(cached.untrusted[name], fresh.untrusted[name])
    assert cached.slack == fresh.slack and cached.notes == fresh.notes


def test_editing_an_ops_file_changes_its_cases_keys(tmp_path: Path) -> None:
    path = tmp_path / "edited_ops.py"
    path.write_text(WRONG_VJP_OPS)
    load_ops_files([path])
    (case,) = load(tmp_path, "cases:\n  - name: c\n    expr: cube(x)\n    inputs: {x: [1.0]}\n")
    cache = ReferenceCache(tmp_path / "c")
    before = cache.key(case, "numeric")
    path.write_text(WRONG_VJP_OPS + "\n# edited\n")  # no cache to clear: keyed by its mtime
    assert cache.key(case, "numeric") != before


def test_the_json_report_says_which_reference(tmp_path: Path) -> None:
    cases = load(
        tmp_path,
        "cases:\n  - name: a\n    expr: x * x\n    inputs: {x: [1.0]}\n"
        "  - name: b\n    expr: x * x\n    inputs: {x: [1.0]}\n    reference: numeric\n",
    )
    report = to_dict(run(cases, BuiltinEngine, RunOptions()), tool_version="t")
    assert [c["reference"] for c in report["cases"]] == ["tensorflow", "numeric"]
    assert report["reference"].startswith("tensorflow ") and report["reference"].endswith(
        numeric.LABEL
    )
    only = to_dict(run(cases[1:], BuiltinEngine, RunOptions()), tool_version="t")
    assert only["reference"] == numeric.LABEL


# --- a machine without TensorFlow -----------------------------------------------------------


def test_the_shipped_suite_runs_without_tensorflow(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            NO_TENSORFLOW + WRAPPER,
            "run",
            str(ROOT / "cases"),
            "--reference",
            "numeric",
            "-f",
            "json",
            "--cache-dir",
            str(tmp_path / "c"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith("tensorflow imported: False")
    report = json.loads(done.stdout)
    assert report["reference"] == numeric.LABEL
    statuses = {c["status"] for c in report["cases"]}
    assert statuses == {"passed"} and len(report["cases"]) == len(shipped())

    seed = str(ROOT / "cases" / "seed.yaml")
    without = subprocess.run(
        [sys.executable, "-c", NO_TENSORFLOW + WRAPPER, "run", seed, "-f", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert without.returncode == 1
    (case,) = json.loads(without.stdout)["cases"]
    assert case["status"] == "error"
    assert "install gradcheck[tensorflow], or use --reference numeric" in case["message"]


class ForwardOffByOne(BuiltinEngine):
    def value(self, node):
        return super().value(node) + 1.0


def test_under_the_numeric_reference_no_message_speaks_of_tensorflow(tmp_path):
    """Issue 22: the forward-mismatch hint and `expect`'s problem once named TensorFlow's
    op and gradient when no TensorFlow was involved."""
    cases = load(
        tmp_path,
        """\
        cases:
          - name: forward
            expr: x * y + y
            inputs: {x: [1.0, 2.0], y: [3.0, 4.0]}
          - name: pinned
            expr: sum(x * x)
            inputs: {x: [1.0, 2.0]}
            expect: {x: [5.0, 5.0]}
        """,
    )
    options = RunOptions(reference="numeric", isolate="none")
    report = to_dict(run(cases, ForwardOffByOne, options), tool_version="t")
    forward, pinned = report["cases"]
    assert forward["hints"][0]["code"] == "forward-mismatch"
    assert "`value(node)` with the reference's op by op" in forward["hints"][0]["fix"]
    assert (
        "the reference's gradient for x no longer matches the pinned `expect`"
        in (pinned["message"])
    )
    assert "TensorFlow" not in json.dumps(report["cases"])
