"""Forward mode (``modes: [rev, fwd]``): the case format, the JVP checks against TensorFlow's
ForwardAccumulator and finite differences, the two modes held to each other, and the
diagnosis of wrong JVPs (patterns, each node's JVP alone with the mechanism probes,
the catalogue's forward-mode faults). Planted bugs are one-method subclasses of the
builtin engine, which the suite holds to TensorFlow op by op (test_op_jvps_and_hvps.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from engines_for_tests import NoJvp, load_cases
from gradcheck.cases import Case, load_paths
from gradcheck.cli import app
from gradcheck.diagnosis.faults.planted import CATALOGUE, FAULTS, FaultyEngine
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.ops import all_ops
from gradcheck.report.json_report import to_dict
from gradcheck.runner import RunOptions, check_case, run

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "cases" / "forward_and_second_order.yaml"


def shipped() -> list[Case]:
    items = load_paths([SHIPPED])
    assert all(isinstance(item, Case) for item in items), items
    return items  # type: ignore[return-value]


# -- planted bugs: one rule each -----------------------------------------------------------


class TanhJvpFromInput(BuiltinEngine):
    """tanh's JVP computes 1 - x**2 from the input; its VJP is right."""

    def jvp_rule(self, op, i):
        if op.name == "tanh":
            return lambda t, ans, x: t * (1 - x * x)
        return super().jvp_rule(op, i)


class TanhVjpFromInput(BuiltinEngine):
    """The other way round: tanh's VJP is wrong, its JVP right."""

    def vjp_rule(self, op, i):
        if op.name == "tanh":
            return lambda g, ans, x: g * (1 - x * x)
        return super().vjp_rule(op, i)


class JacobianNotJvp(BuiltinEngine):
    """sin's JVP returns the local derivative without the tangent (functorch#207's bug)."""

    def jvp_rule(self, op, i):
        if op.name == "sin":
            return lambda t, ans, x: np.cos(x)
        return super().jvp_rule(op, i)


class DoubledExpJvp(BuiltinEngine):
    def jvp_rule(self, op, i):
        if op.name == "exp":
            return lambda t, ans, x: 2 * t * ans
        return super().jvp_rule(op, i)


def one_case(tmp_path: Path, expr: str, inputs: dict, modes: str = "[rev, fwd]") -> Case:
    """A case of `expr` on `inputs` (name -> YAML spec) with a random cotangent."""
    specs = "".join(f"\n      {name}: {spec}" for name, spec in inputs.items())
    text = f"cases:\n  - name: planted\n    expr: {expr}\n    cotangent: random\n"
    (case,) = load_cases(tmp_path, f"{text}    modes: {modes}\n    inputs:{specs}\n")
    return case


# -- the case format -----------------------------------------------------------------------


def test_modes_and_order_are_case_keys_with_defaults(tmp_path: Path) -> None:
    cases = load_cases(
        tmp_path,
        """
        defaults: {modes: [fwd], order: 2}
        cases:
          - {name: inherits, expr: sin(x), inputs: {x: [1.0, 2.0]}}
          - {name: own, expr: sin(x), inputs: {x: [1.0, 2.0]}, modes: [rev, fwd], order: 1}
        """,
    )
    assert [(c.modes, c.order) for c in cases] == [(("fwd",), 2), (("rev", "fwd"), 1)]
    (plain,) = load_cases(tmp_path, "cases: [{name: p, expr: sin(x), inputs: {x: 1.0}}]", "p.yaml")
    assert (plain.modes, plain.order) == (None, None)  # the run's --modes/--order decide


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("modes: [rev, back]", "modes must be a list of rev and fwd"),
        ("modes: []", "modes must be a list"),
        ("modes: [fwd, fwd]", "without repeats"),
        ("order: 3", "order must be 1 or 2"),
        ("order: true", "order must be 1 or 2"),
    ],
)
def test_bad_modes_and_orders_name_their_line(tmp_path: Path, setting: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        f"cases:\n  - name: bad\n    expr: sin(x)\n    inputs: {{x: 1.0}}\n    {setting}\n"
    )
    (invalid,) = load_paths([path])
    assert not isinstance(invalid, Case)
    assert invalid.line == 5 and message in invalid.message


def test_tangents_are_seeded_per_input_and_reproducible(tmp_path: Path) -> None:
    case = one_case(tmp_path, "x * y", {"x": "{shape: [2, 3]}", "y": "{shape: [3]}"})
    first, again = case.tangents(), case.tangents()
    assert list(first) == ["x", "y"] and first["y"].shape == (3,)
    np.testing.assert_array_equal(first["x"], again["x"])
    assert not np.allclose(first["x"], case.inputs["x"])  # a stream of its own
    assert not np.allclose(first["x"][0], case.directions()["x"][0])  # v differs from t


# -- the shipped cases ---------------------------------------------------------------------


def test_the_shipped_cases_exercise_forward_mode_and_second_order_on_every_op() -> None:
    used = {n.op.name for c in shipped() for n in c.expression.op_nodes if n.op}
    assert used == {op.name for op in all_ops()}
    assert all(c.modes == ("rev", "fwd") and c.order == 2 for c in shipped())


def test_the_builtin_engine_passes_them_in_both_modes_held_to_each_other() -> None:
    result = run(shipped(), BuiltinEngine, RunOptions())
    for case in result.cases:
        assert case.status == "passed", (case.name, case.message)
        assert {i.name for i in case.jvp} == {i.name for i in case.inputs}
        assert all(i.comparison.passed and i.consistency.passed for i in case.jvp)
        assert {i.name for i in case.hvp} == {i.name for i in case.inputs}
        assert case.hints == []


def test_tensorflow_and_finite_differences_agree_on_every_shipped_jvp_and_hvp() -> None:
    """`--reference both`: a reference-disagreement would mean the oracle is in doubt."""
    result = run(shipped(), BuiltinEngine, RunOptions(reference="both"))
    for case in result.cases:
        assert case.status == "passed", (case.name, case.message, case.hints)


def test_numeric_reference_alone_judges_both() -> None:
    result = run(shipped(), TanhJvpFromInput, RunOptions(reference="numeric"))
    failing = {c.name for c in result.cases if c.status == "failed"}
    with_tanh = {
        c.name for c in shipped() if any(n.op.name == "tanh" for n in c.expression.op_nodes)
    }
    assert failing == with_tanh
    for case in result.cases:
        if case.name in failing:
            assert all(i.comparison.passed for i in case.inputs)  # reverse mode is right


# -- the two modes against each other -----------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "wrong"),
    [
        (TanhJvpFromInput, "forward mode (the JVP)"),
        (TanhVjpFromInput, "reverse mode (the gradient)"),
    ],
)
def test_the_consistency_check_catches_a_bug_only_one_mode_has(
    tmp_path: Path, engine: type, wrong: str
) -> None:
    case = one_case(tmp_path, "tanh(x * y) + x", {"x": "{shape: [2, 3]}", "y": "{shape: [3]}"})
    result = check_case(case, engine, RunOptions())
    assert result.status == "failed"
    rev_ok = all(i.comparison.passed for i in result.inputs)
    fwd_ok = all(i.comparison.passed for i in result.jvp)
    assert (rev_ok, fwd_ok) == ((True, False) if engine is TanhJvpFromInput else (False, True))
    for item in result.jvp:
        assert item.consistency is not None and not item.consistency.passed
        assert abs(item.consistency.vjp_dot - item.consistency.jvp_dot) > item.consistency.bound
        mismatch = next(h for h in item.hints if h.code == "jvp-vjp-mismatch")
        assert f"the reference says {wrong} is the wrong one" in mismatch.message


def test_the_consistency_is_reported_in_the_json_report(tmp_path: Path) -> None:
    case = one_case(tmp_path, "tanh(x) * 3", {"x": "{shape: [4]}"})
    report = to_dict(run([case], TanhJvpFromInput, RunOptions()), tool_version="test")
    (entry,) = report["cases"]
    assert entry["modes"] == ["rev", "fwd"] and entry["order"] == 1
    assert [i["name"] for i in entry["inputs"]] == ["x"]  # reverse mode, as before
    assert entry["inputs"][0]["status"] == "passed" and "consistency" not in entry["inputs"][0]
    (jvp,) = entry["jvp"]["inputs"]
    assert jvp["status"] == "failed" and jvp["consistency"]["status"] == "failed"
    assert {"vjp_dot", "jvp_dot", "bound"} <= set(jvp["consistency"])
    assert {n["check"] for n in entry["nodes"]} == {"jvp"}
    json.dumps(report, allow_nan=False)


# -- localisation and mechanisms -----------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "expr", "node", "mechanism"),
    [
        (TanhJvpFromInput, "tanh(x * y) + x", "tanh(x * y)", "formula"),
        (JacobianNotJvp, "sin(x) * y", "sin(x)", "ignores-upstream"),
        (DoubledExpJvp, "exp(x) * y", "exp(x)", "scaled"),
    ],
)
def test_a_wrong_jvp_is_named_by_node_and_mechanism(
    tmp_path: Path, engine: type, expr: str, node: str, mechanism: str
) -> None:
    case = one_case(tmp_path, expr, {"x": "{shape: [2, 3]}", "y": "{shape: [2, 3]}"})
    result = check_case(case, engine, RunOptions())
    top = result.hints[0]
    assert (top.code, top.node, top.mechanism) == ("op-jvp", node, mechanism), result.hints
    assert [n.node for n in result.nodes if n.status == "failed"] == [node]
    op = node.split("(")[0]
    assert f"{op}'s JVP for x is `" in top.fix  # the right rule, from the declaration
    if mechanism == "ignores-upstream":
        assert "ignores its tangent: two different tangents" in top.message
    if mechanism == "scaled":
        assert top.factor == 2


# -- forward-mode fingerprints -------------------------------------------------------------

JVP_FAULT_CASES = {
    "jvp.vjp-rule": ("x @ y", {"x": "{shape: [3, 3]}", "y": "{shape: [3, 3]}"}),
    "jvp.no-broadcast": ("x + b", {"x": "{shape: [2, 3]}", "b": "{shape: [3]}"}),
}


def test_every_forward_mode_fault_has_a_case() -> None:
    assert set(JVP_FAULT_CASES) == {f.name for f in CATALOGUE if f.check == "jvp"}


@pytest.mark.parametrize("name", list(JVP_FAULT_CASES))
def test_each_forward_mode_fault_fingerprints_itself_first(tmp_path: Path, name: str) -> None:
    fault = FAULTS[name]
    expr, inputs = JVP_FAULT_CASES[name]
    case = one_case(tmp_path, expr, inputs)
    result = check_case(case, lambda: FaultyEngine(fault), RunOptions())
    assert result.status == "failed"
    assert all(i.comparison.passed for i in result.inputs)  # reverse mode untouched
    assert result.hints[0].code == fault.code, [h.code for h in result.hints]
    assert result.hints[0].confidence == "exact" and result.hints[0].fix == fault.fix
    nodes = [h for h in result.hints if h.code == "op-jvp"]
    assert nodes and all(h.mechanism in (fault.code, "shape") for h in nodes)
    for item in result.jvp:
        if not item.comparison.passed:
            assert item.hints[0].code == fault.code


def test_a_missing_tangent_broadcast_is_named_at_broadcast_to_as_at_a_binary_op(
    tmp_path: Path,
) -> None:
    """broadcast_to's JVP leaves the tangent in x's shape for the engine's one broadcast
    step, as the binary ops do, so a missing broadcast there is the same fault (summed
    after, the tangent loses its copies: x's instead of twice x's)."""
    case = one_case(tmp_path, "sum(broadcast_to(x, shape=[2, 3]), axis=0)", {"x": "{shape: [3]}"})
    assert check_case(case, BuiltinEngine, RunOptions()).status == "passed"
    fault = FAULTS["jvp.no-broadcast"]
    result = check_case(case, lambda: FaultyEngine(fault), RunOptions())
    assert result.status == "failed" and all(i.comparison.passed for i in result.inputs)
    assert (result.hints[0].code, result.hints[0].confidence) == (fault.code, "exact")
    (x,) = result.jvp
    assert not x.comparison.passed


def test_a_missing_tangent_broadcast_is_a_shape_seen_by_the_node_check(tmp_path: Path) -> None:
    case = one_case(tmp_path, "x + b", {"x": "{shape: [2, 3]}", "b": "{shape: [3]}"})
    result = check_case(case, lambda: FaultyEngine(FAULTS["jvp.no-broadcast"]), RunOptions())
    b = next(i for i in result.jvp if i.name == "b")
    assert (b.comparison.reference_shape, b.comparison.engine_shape) == ((2, 3), (3,))


# -- what an engine cannot do ------------------------------------------------------------


def test_an_engine_without_jvp_is_unsupported_for_forward_mode(tmp_path: Path) -> None:
    case = one_case(tmp_path, "sin(x)", {"x": "{shape: [3]}"})
    result = check_case(case, NoJvp, RunOptions())
    assert result.status == "skipped"
    assert result.message.startswith("unsupported: forward mode (JVPs): engine has no jvp()")
    assert [i.status for i in result.inputs] == ["passed"]  # reverse mode still checked
    assert check_case(case, NoJvp, RunOptions(strict=True)).status == "failed"
    broken = check_case(case, TanhVjpFromInput, RunOptions())  # no tanh: a passing engine
    assert broken.status == "passed"


def test_a_reverse_mode_failure_is_not_hidden_by_an_unsupported_mode(tmp_path: Path) -> None:
    case = one_case(tmp_path, "tanh(x)", {"x": "{shape: [3]}"})

    class Both(NoJvp, TanhVjpFromInput):
        pass

    result = check_case(case, Both, RunOptions())
    assert result.status == "failed"
    assert "not checked: forward mode (JVPs)" in result.message


def test_forward_mode_alone_needs_no_grad(tmp_path: Path) -> None:
    case = one_case(
        tmp_path, "exp(x) @ y", {"x": "{shape: [2, 3]}", "y": "{shape: [3, 2]}"}, "[fwd]"
    )
    result = check_case(case, BuiltinEngine, RunOptions())
    assert result.status == "passed" and result.inputs == [] and len(result.jvp) == 2
    assert result.forward is not None and result.forward.passed


# -- the command line and the cache ------------------------------------------------------


def test_cli_modes_and_order_apply_to_cases_that_say_none(tmp_path: Path) -> None:
    runner = CliRunner()
    nn = str(ROOT / "cases" / "nn.yaml")
    out = runner.invoke(app, ["run", nn, "--no-cache", "--modes", "rev,fwd", "--order", "2",
                              "--format", "json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert all(c["modes"] == ["rev", "fwd"] and c["order"] == 2 for c in report["cases"])
    assert all(c["jvp"]["inputs"] and c["hvp"]["inputs"] for c in report["cases"])
    bad = runner.invoke(app, ["run", nn, "--modes", "sideways"])
    assert bad.exit_code == 2 and "modes must be" in bad.output


def test_each_check_is_cached_under_a_key_of_its_own(tmp_path: Path) -> None:
    from gradcheck.references.cache import ReferenceCache

    cases = shipped()[:2]
    cache = ReferenceCache(tmp_path / "cache")
    run(cases, BuiltinEngine, RunOptions(cache=cache))
    paths = {cache.path(c, "tensorflow", check) for c in cases for check in ("vjp", "jvp", "hvp")}
    assert len(paths) == 6 and all(p.exists() for p in paths)
    again = ReferenceCache(tmp_path / "cache")
    result = run(cases, BuiltinEngine, RunOptions(cache=again))
    assert all(c.status == "passed" for c in result.cases)
    assert (again.hits, again.misses) == (6, 0)
