"""Diagnosis (SPEC §6): every hint code from an engine that earns it, with its confidence
and fields; localisation; ranking; and a diagnosis that never becomes the failure.

Each wrong engine is the builtin engine with one thing changed: `transformed(fn)` hands
back `fn(right gradients)`, so the bug is a known function of the right answer; the
others override one VJP rule or one step of the backward pass.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gradcheck.checking.diagnosis_step as checking
import gradcheck.diagnosis as diagnosis
from case_files import make_case
from gradcheck.cases import Case
from gradcheck.diagnosis import rank
from gradcheck.diagnosis.faults import fingerprints
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.diagnosis.mechanisms import patterns
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.loading import load_engine
from gradcheck.ops.broadcast import fmt_shape
from gradcheck.results import CaseResult, Hint
from gradcheck.runner import RunOptions, run

# -- helpers -------------------------------------------------------------------------------


def check(case: Case, factory, **options) -> CaseResult:
    [result] = run([case], factory, RunOptions(**options)).cases
    return result


def normal(*shape: int) -> dict:
    return {"shape": list(shape)}


def codes(hints: list[Hint]) -> list[str]:
    return [h.code for h in hints]


def find(hints: list[Hint], code: str) -> Hint:
    found = [h for h in hints if h.code == code]
    assert found, f"no {code!r} among {codes(hints)}"
    return found[0]


def input_hints(result: CaseResult, name: str) -> list[Hint]:
    [item] = [i for i in result.inputs if i.name == name]
    return item.hints


class Transformed(BuiltinEngine):
    """The right gradients, then `transform`: a bug that is a known function of the answer."""

    name = "transformed"

    @staticmethod
    def transform(grads: list[np.ndarray]) -> list[np.ndarray]:
        return grads

    def grad(self, output, wrt, cotangent):
        right = [np.array(g) for g in super().grad(output, wrt, cotangent)]
        return self.transform(right)


def transformed(fn) -> type[BuiltinEngine]:
    return type("Transformed", (Transformed,), {"transform": staticmethod(fn)})


def second(fn) -> type[BuiltinEngine]:
    """Only the second gradient (the op's argument 1 when a node is checked alone) is changed."""
    return transformed(lambda gs: [gs[0], fn(gs[1]), *gs[2:]])


def with_vjp(op_name: str, arg: int, rule) -> type[BuiltinEngine]:
    """The builtin engine with one VJP rule replaced (a bug the catalogue may not know)."""

    def vjp_rule(self, op, i):
        if (op.name, i) == (op_name, arg):
            return rule
        return BuiltinEngine.vjp_rule(self, op, i)

    return type("WithVJP", (BuiltinEngine,), {"vjp_rule": vjp_rule, "name": "with-vjp"})


XY = {"x": normal(2, 3), "y": normal(2, 3)}


# -- shape patterns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x_shape", "b_shape", "axes"),
    [((2, 3), (3,), [0]), ((2, 3, 4), (4,), [0, 1]), ((2, 3, 4), (3, 1), [0, 2])],
    ids=["one-leading", "two-leading", "leading+size1"],
)
def test_missing_unbroadcast_names_the_axes(tmp_path, x_shape, b_shape, axes):
    case = make_case(tmp_path, "x + b", {"x": normal(*x_shape), "b": normal(*b_shape)})
    result = check(case, lambda: FaultyEngine(FAULTS["broadcast.no-reduce"]))
    hint = find(input_hints(result, "b"), "missing-unbroadcast")
    assert hint.confidence == "exact"
    assert hint.axes == axes
    assert str(x_shape) in hint.message  # the broadcast shape the gradient has
    assert input_hints(result, "x") == []  # x passed: no hints for it


def test_unbroadcast_size1_when_keepdims_is_missing(tmp_path):
    case = make_case(tmp_path, "x + b", {"x": normal(3, 4), "b": normal(3, 1)})
    # the right numbers, summed without keepdims: (3,) instead of (3, 1)
    result = check(case, second(lambda g: g.reshape(-1)))
    hint = find(input_hints(result, "b"), "unbroadcast-size1")
    assert hint.confidence == "exact"
    assert hint.axes == [1]
    assert "keepdims" in hint.message


@pytest.mark.parametrize(
    ("b_shape", "axes"), [((3, 1), [1]), ((1, 3, 1), [0, 2])], ids=["leading", "no-leading"]
)
def test_unbroadcast_size1_when_only_leading_axes_are_summed(tmp_path, b_shape, axes):
    case = make_case(tmp_path, "x * b", {"x": normal(2, 3, 4), "b": normal(*b_shape)})
    result = check(case, lambda: FaultyEngine(FAULTS["broadcast.leading-only"]))
    hint = find(input_hints(result, "b"), "unbroadcast-size1")
    assert hint.confidence == "exact"
    assert hint.axes == axes  # b's size-1 axes; any leading axis was summed
    assert result.hints[0].code.startswith("fault:broadcast.")


@pytest.mark.parametrize(
    ("fn", "relation"),
    [
        (lambda g: g.reshape(-1), "missing reshape"),
        (lambda g: g.T, "another order"),
        (lambda g: g[:1], ""),
    ],
    ids=["flattened", "transposed-shape", "cut"],
)
def test_shape_mismatch_says_what_relates_the_shapes(tmp_path, fn, relation):
    case = make_case(tmp_path, "x * y", XY)
    result = check(case, second(fn))
    [hint] = input_hints(result, "y")
    assert hint.code == "shape-mismatch"
    assert hint.confidence == "exact"
    assert "(2, 3)" in hint.message
    assert relation in hint.message


# -- value patterns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "axes"), [((3, 3), [0, 1]), ((2, 3, 3), [1, 2])], ids=["matrix", "batched"]
)
def test_transposed_names_the_swapped_axes(tmp_path, shape, axes):
    case = make_case(tmp_path, "x @ y", {"x": normal(*shape), "y": normal(*shape)})
    result = check(case, transformed(lambda gs: [np.swapaxes(g, *axes) for g in gs]))
    for name in ("x", "y"):
        hint = find(input_hints(result, name), "transposed")
        assert hint.confidence == "exact"
        assert hint.axes == axes


def test_scaled_by_two_is_double_counted(tmp_path):
    case = make_case(tmp_path, "x * y", XY)
    result = check(case, transformed(lambda gs: [2 * g for g in gs]))
    hint = find(input_hints(result, "x"), "scaled")
    assert (hint.confidence, hint.factor) == ("exact", 2.0)
    assert "double counted" in hint.message
    assert "mean vs sum" not in hint.message


def test_scaled_by_two_beside_a_mean_over_two_says_both(tmp_path):
    case = make_case(tmp_path, "mean(x * y, axis=1)", {"x": normal(3, 2), "y": normal(3, 2)})
    result = check(case, transformed(lambda gs: [2 * g for g in gs]))
    hint = find(input_hints(result, "x"), "scaled")
    assert hint.factor == 2.0
    assert "double counted" in hint.message and "mean vs sum (N = 2)" in hint.message


@pytest.mark.parametrize(
    ("expr", "factor"),
    [("mean(x * y, axis=1)", 4.0), ("sum(x * y, axis=1)", 0.25)],
    ids=["N", "1/N"],
)
def test_scaled_by_a_reduced_size_is_mean_vs_sum(tmp_path, expr, factor):
    case = make_case(tmp_path, expr, {"x": normal(2, 4), "y": normal(2, 4)})
    result = check(case, transformed(lambda gs: [factor * g for g in gs]))
    hint = find(input_hints(result, "x"), "scaled")
    assert (hint.confidence, hint.factor) == ("exact", factor)
    assert "mean vs sum (N = 4)" in hint.message
    assert "double counted" not in hint.message


def test_scaled_by_another_factor_only_names_it(tmp_path):
    case = make_case(tmp_path, "mean(x * y, axis=1)", {"x": normal(2, 4), "y": normal(2, 4)})
    result = check(case, transformed(lambda gs: [3 * g for g in gs]))
    hint = find(input_hints(result, "x"), "scaled")
    assert hint.factor == 3.0
    assert "mean vs sum" not in hint.message and "double counted" not in hint.message


def test_sign_flip(tmp_path):
    case = make_case(tmp_path, "x * y", XY)
    result = check(case, second(lambda g: -g))
    [hint] = input_hints(result, "y")
    assert (hint.code, hint.confidence, hint.factor) == ("sign-flip", "exact", -1.0)
    assert not any(h.code == "scaled" for h in input_hints(result, "y"))


def test_zero_gradient_everywhere_is_exact_and_in_places_possible(tmp_path):
    case = make_case(tmp_path, "x * y", XY)
    everywhere = check(case, second(np.zeros_like))
    hint = find(input_hints(everywhere, "y"), "zero-gradient")
    assert hint.confidence == "exact"
    assert "everywhere" in hint.message

    def zero_first_row(g):
        g[0] = 0.0
        return g

    partly = check(case, second(zero_first_row))
    hint = find(input_hints(partly, "y"), "zero-gradient")
    assert hint.confidence == "possible"
    assert "at 3 of 6 elements" in hint.message


def test_swapped_gradients_names_the_other_input(tmp_path):
    case = make_case(tmp_path, "x * y", XY)
    result = check(case, transformed(lambda gs: gs[::-1]))
    hint = find(input_hints(result, "x"), "swapped-gradients")
    assert hint.confidence == "exact"
    assert "reference gradient of y" in hint.message
    assert "reference gradient of x" in find(input_hints(result, "y"), "swapped-gradients").message


def test_a_rule_using_the_wrong_argument_is_no_order_swap(tmp_path):
    """mul's VJP for b written `g * b`: y's gradient is x's reference, but x's is right.
    An order swap would show both ways; this names the op's rule first, the swap only as
    likely. (A real engine: the README's tiny engine with that one rule changed.)"""
    tiny = (Path(__file__).parent.parent / "examples" / "tiny_engine.py").read_text()
    right = "(b, lambda g: g * a.value)"
    assert right in tiny
    engine = tmp_path / "wrong_arg.py"
    engine.write_text(tiny.replace(right, "(b, lambda g: g * b.value)"))
    result = check(make_case(tmp_path, "x * y", XY), load_engine(str(engine)))
    assert result.hints[0].code == "op-vjp" and result.hints[0].node == "x * y"
    swapped = find(input_hints(result, "y"), "swapped-gradients")
    assert swapped.confidence == "likely" and "not an order swap" in swapped.message
    assert not any(h.code == "swapped-gradients" for h in input_hints(result, "x"))


def one_ulp_up(gs):
    return [np.nextafter(g.astype(np.float32), np.float32(np.inf)) for g in gs]


@pytest.mark.parametrize("inputs", [XY, {"x": [2.0], "y": [3.0]}], ids=["matrix", "one-element"])
def test_precision_for_one_ulp_with_a_zero_tolerance(tmp_path, inputs):
    exact = {"rtol": 0.0, "atol": 0.0}
    case = make_case(tmp_path, "x * y", inputs, dtype="float32", tolerance=exact)
    result = check(case, transformed(one_ulp_up))
    assert result.status == "failed"
    assert result.hints[0].code == "precision"
    assert set(codes(result.hints)) == {"precision"}
    for item in result.inputs:  # and not also "1.0 × the reference"
        assert codes(item.hints) == ["precision"]
    assert result.hints[0].confidence == "likely"
    assert "ulps of float32" in result.hints[0].message
    assert result.nodes == []  # rounding: no localisation, no fingerprints


def test_rounding_on_one_input_does_not_outrank_a_real_bug_on_another(tmp_path):
    case = make_case(tmp_path, "x * y", XY, dtype="float32", tolerance={"rtol": 0.0, "atol": 0.0})
    result = check(case, transformed(lambda gs: [one_ulp_up(gs)[0], -gs[1]]))
    assert input_hints(result, "x")[0].code == "precision"
    assert result.hints[0].code != "precision", codes(result.hints)
    assert "precision" in codes(result.hints)
    # y's sign flip is a consequence of mul's VJP for y, found alone: folded into it
    top = result.hints[0]
    assert (top.code, top.op, top.arg, top.mechanism) == ("op-vjp", "mul", 1, "sign-flip")
    assert "sign-flip" in codes(top.also)
    assert [h.arg for h in result.hints if h.code == "op-vjp"] == [1]  # x's ulp is no bug


def test_nan_mismatch_where_the_engine_has_nan(tmp_path):
    def nan_first(g):
        g.flat[0] = np.nan
        return g

    case = make_case(tmp_path, "x * y", XY)
    result = check(case, second(nan_first))
    hint = find(input_hints(result, "y"), "nan-mismatch")
    assert hint.confidence == "exact"
    assert "engine has NaN/Inf" in hint.message
    assert "precision" not in codes(input_hints(result, "y"))


def test_an_infinite_reference_is_no_rounding(tmp_path):
    # sqrt'(0) is inf; an engine that gives 0 there is not "within a few ulps".
    case = make_case(tmp_path, "sqrt(x)", {"x": [0.0, 1.0, 4.0]})
    result = check(case, transformed(lambda gs: [np.nan_to_num(g, posinf=0.0) for g in gs]))
    hints = input_hints(result, "x")
    assert "reference has NaN/Inf" in find(hints, "nan-mismatch").message
    assert "precision" not in codes(hints)
    assert "precision" not in codes(result.hints)
    assert find(result.hints, "op-vjp").node == "sqrt(x)"  # localisation ran


# -- forward, stale, kinks -----------------------------------------------------------------


class WrongForward(BuiltinEngine):
    def value(self, node):
        return super().value(node) + 1.0


def test_forward_mismatch_comes_first(tmp_path):
    case = make_case(tmp_path, "x * y + y", XY)
    result = check(case, WrongForward)
    assert result.status == "failed"
    [hint] = result.hints  # gradients are right: nothing else to say
    assert (hint.code, hint.confidence, hint.node) == ("forward-mismatch", "exact", "x * y + y")


class ForwardKeepsAnAxis(BuiltinEngine):
    def value(self, node):
        return np.expand_dims(super().value(node), 0)


def test_forward_mismatch_of_shape_names_both_shapes(tmp_path):
    case = make_case(tmp_path, "x * y + y", XY)
    hint = check(case, ForwardKeepsAnAxis).hints[0]
    assert hint.code == "forward-mismatch"
    shape = case.expression.output.shape
    assert f"shape {fmt_shape((1, *shape))} where the reference's is {fmt_shape(shape)}" in (
        hint.message
    ), hint.message


class WrongForwardAndGradients(WrongForward):
    def grad(self, output, wrt, cotangent):
        return [-np.asarray(g) for g in super().grad(output, wrt, cotangent)]


def test_forward_mismatch_ranks_before_everything_else(tmp_path):
    result = check(make_case(tmp_path, "x * y + y", XY), WrongForwardAndGradients)
    assert result.hints[0].code == "forward-mismatch"
    assert result.hints[0].node == "x * y + y"
    first_other = next(i for i, h in enumerate(result.hints) if h.code != "forward-mismatch")
    assert all(h.code != "forward-mismatch" for h in result.hints[first_other:])
    assert "sign-flip" in codes(result.hints)
    # a wrong forward makes every fingerprint meaningless: none is tried
    assert not any(c.startswith("fault:") for c in codes(result.hints))
    # localisation names the nodes whose forward is wrong alone
    nodes = {h.node for h in result.hints if h.code == "forward-mismatch" and h.op}
    assert nodes == {"x * y", "x * y + y"}


class Stale(BuiltinEngine):
    """The first answer is right; asking again adds to it (no zero_grad)."""

    def __init__(self) -> None:
        self.calls = 0

    def grad(self, output, wrt, cotangent):
        self.calls += 1
        return [self.calls * g for g in super().grad(output, wrt, cotangent)]


def test_stale_gradients(tmp_path):
    result = check(make_case(tmp_path, "x * y", XY), Stale)
    assert result.status == "failed"
    assert all(item.status == "passed" for item in result.inputs)
    [hint] = result.hints
    assert (hint.code, hint.confidence) == ("stale-gradients", "exact")
    assert "x, y" in hint.message


def test_kink_names_tensorflows_relu_convention(tmp_path):
    # relu'(0) = 1 where TensorFlow takes 0; x - y is exactly 0 in two places
    engine = with_vjp("relu", 0, lambda g, ans, x: g * (x >= 0))
    case = make_case(
        tmp_path,
        "relu(x - y) * z",
        {"x": [[1.0, 2.0, 3.0]], "y": [[1.0, 0.5, 3.0]], "z": normal(1, 3)},
    )
    result = check(case, engine)
    # the catalogue knows this one: its fingerprint is the best explanation, and the kink
    # at relu(x - y) is folded into it, a consequence rather than a rival
    top = result.hints[0]
    assert top.code == "fault:relu.kink"
    kink = find(top.also, "kink")
    assert (kink.confidence, kink.op, kink.node, kink.arg) == ("exact", "relu", "relu(x - y)", 0)
    assert kink.mechanism == "relu:one"
    assert "relu'(0) = 0" in kink.message and "TensorFlow" in kink.message
    assert "(2 elements)" in kink.message
    assert "kink" not in codes(result.hints)
    assert [(n.op, n.status) for n in result.nodes] == [
        ("sub", "passed"),
        ("relu", "failed"),
        ("mul", "passed"),
    ]


def test_kink_at_a_maximum_tie_names_both_arguments(tmp_path):
    # splitting a tie half and half, where TensorFlow gives it all to the first argument
    def split(i):
        return lambda g, ans, a, b: g * np.where(a == b, 0.5, a > b if i == 0 else b > a)

    engine = type(
        "Split",
        (BuiltinEngine,),
        {
            "vjp_rule": lambda self, op, i: (
                split(i) if op.name == "maximum" else BuiltinEngine.vjp_rule(self, op, i)
            )
        },
    )
    case = make_case(
        tmp_path, "maximum(x, y) * z", {"x": [1.0, 2.0, 3.0], "y": [1.0, 0.5, 4.0], "z": normal(3)}
    )
    result = check(case, engine)
    assert result.hints[0].code == "kink"  # not in the catalogue: the kink is the best
    kinks = [h for h in result.hints if h.code == "kink"]
    assert sorted(h.arg for h in kinks) == [0, 1]
    for hint in kinks:
        assert (hint.op, hint.node) == ("maximum", "maximum(x, y)")
        assert hint.mechanism == "maximum:split"  # probed: the split convention reproduces it
        assert "TensorFlow gives a tie's whole gradient to a (`first`)" in hint.message
        assert "`split` is a valid subgradient" in hint.message
        assert 'conventions = {"maximum": "split"}' in hint.fix


# -- localisation --------------------------------------------------------------------------


def test_op_vjp_localises_a_bug_the_catalogue_does_not_know(tmp_path):
    # exp's VJP ignores the upstream gradient
    engine = with_vjp("exp", 0, lambda g, ans, x: ans)
    case = make_case(tmp_path, "sin(exp(x) * y) + y", XY)
    result = check(case, engine)
    top = result.hints[0]
    assert (top.code, top.op, top.node, top.arg) == ("op-vjp", "exp", "exp(x)", 0)
    assert (top.mechanism, top.confidence) == ("ignores-upstream", "exact")
    assert "`g * np.exp(x)`" in top.fix
    assert not any(c.startswith("fault:") for c in codes(result.hints))
    assert [h.node for h in result.hints if h.code == "op-vjp"] == ["exp(x)"]
    failed = [(n.node, n.op, n.args) for n in result.nodes if n.status == "failed"]
    assert failed == [("exp(x)", "exp", [0])]
    assert len(result.nodes) == 4
    assert input_hints(result, "y") == []  # y's gradient does not pass through exp


def test_op_vjp_names_the_argument(tmp_path):
    # div's VJP for the denominator divides by b**3 (neither div.sign nor div.square)
    engine = with_vjp("div", 1, lambda g, ans, a, b: -g * a / b**3)
    case = make_case(
        tmp_path,
        "exp(x) / y + x",
        {"x": normal(2, 3), "y": {"shape": [2, 3], "init": "positive"}},
    )
    result = check(case, engine)
    top = result.hints[0]
    assert (top.code, top.op, top.node, top.arg) == ("op-vjp", "div", "exp(x) / y", 1)
    assert "argument 1 (y)" in top.message
    assert input_hints(result, "x") == []


def test_backprop_driver_when_every_node_passes_alone(tmp_path):
    case = make_case(tmp_path, "h = exp(x)\nh * sin(h)", {"x": normal(2, 3)})
    result = check(case, lambda: FaultyEngine(FAULTS["backprop.no-accumulate"]))
    top = result.hints[0]
    assert (top.code, top.mechanism, top.node) == ("backprop-driver", "no-accumulate", "exp(x)")
    assert "used 2 times" in top.message  # how many consumers the node has
    assert result.nodes and all(n.status == "passed" for n in result.nodes)
    assert "op-vjp" not in codes(result.hints)


class SubtractsAtFanOut(BuiltinEngine):
    """A driver bug no fault reproduces: contributions at a fan-out are subtracted."""

    def accumulate(self, grads, arg, share):
        grads[arg] = share if arg not in grads else grads[arg] - share


def test_backprop_driver_is_the_best_guess_for_an_unknown_driver_bug(tmp_path):
    case = make_case(tmp_path, "h = exp(x)\nh * sin(h)", {"x": normal(2, 3)})
    result = check(case, SubtractsAtFanOut)
    assert result.hints[0].code == "backprop-driver"
    assert not any(c.startswith("fault:") for c in codes(result.hints))


# -- ranking -------------------------------------------------------------------------------


def hint(code: str, confidence: str = "exact") -> Hint:
    return Hint(code, code, "fix", confidence)  # type: ignore[arg-type]


def test_rank_orders_confidence_then_specificity():
    ordered = [
        hint("forward-mismatch"),
        hint("stale-gradients"),
        hint("fault:mul.self"),
        hint("kink"),
        hint("op-vjp"),
        hint("missing-unbroadcast"),
        hint("scaled"),
        hint("precision", "likely"),
        hint("op-vjp", "likely"),
        hint("missing-unbroadcast", "likely"),
        hint("zero-gradient", "possible"),
    ]
    shuffled = [ordered[i] for i in (8, 5, 3, 0, 10, 7, 1, 6, 2, 4, 9)]
    assert codes(sorted(shuffled, key=rank)) == codes(ordered)
    assert [h.confidence for h in sorted(shuffled, key=rank)] == [h.confidence for h in ordered]
    assert rank(hint("op-vjp", "likely")) < rank(hint("backprop-driver", "likely"))
    assert rank(hint("fault:backprop.no-upstream")) < rank(hint("backprop-driver", "likely"))


def test_fingerprint_ranks_above_localisation_above_patterns(tmp_path):
    result = check(make_case(tmp_path, "x * y", XY), lambda: FaultyEngine(FAULTS["mul.self"]))
    order = codes(result.hints)
    assert order[0] == "fault:mul.self"
    # what the fault explains is folded into it, in rank order
    folded = codes(result.hints[0].also)
    assert folded.index("op-vjp") < folded.index("swapped-gradients")
    assert all(rank(a) <= rank(b) for a, b in zip(result.hints, result.hints[1:], strict=False))
    # the input's own hints: the fingerprint first, then its pattern
    assert codes(input_hints(result, "x")) == ["fault:mul.self", "swapped-gradients"]


# -- when diagnosis runs, and when it breaks -----------------------------------------------


def test_no_diagnose_gives_no_hints(tmp_path):
    case = make_case(tmp_path, "x * y", XY)
    result = check(case, lambda: FaultyEngine(FAULTS["mul.self"]), diagnose=False)
    assert result.status == "failed"
    assert result.hints == [] and result.nodes == []
    assert all(item.hints == [] for item in result.inputs)


def test_a_passing_case_gets_no_hints(tmp_path):
    case = make_case(tmp_path, "h = exp(x) * y\nrelu(h + h) / y", XY)
    result = check(case, BuiltinEngine)
    assert result.status == "passed"
    assert result.hints == [] and result.nodes == [] and result.message == ""
    assert all(item.hints == [] for item in result.inputs)


def test_diagnosis_runs_only_on_failing_cases(tmp_path, monkeypatch):
    calls: list[str] = []
    real = checking.diagnose

    def spy(evidence):
        calls.append(evidence.case.name)
        return real(evidence)

    monkeypatch.setattr(checking, "diagnose", spy)
    good = make_case(tmp_path, "x * y", XY, name="good")
    bad = make_case(tmp_path, "x - y", XY, name="bad")
    results = run([good, bad], lambda: FaultyEngine(FAULTS["sub.sign"]), RunOptions()).cases
    assert [r.status for r in results] == ["passed", "failed"]
    assert calls == ["bad"]


def _explode(*args, **kwargs):
    raise RuntimeError("diagnosis exploded")


def _raise_in_patterns(monkeypatch):
    # set both names, so the test holds whichever one diagnose looks up
    broken = (_explode, *patterns.ANALYSES)
    monkeypatch.setattr(patterns, "ANALYSES", broken)
    monkeypatch.setattr(diagnosis, "ANALYSES", broken)


@pytest.mark.parametrize(
    ("step", "breaks"),
    [
        ("patterns of x", _raise_in_patterns),
        ("localisation", lambda mp: mp.setattr(diagnosis, "check_nodes", _explode)),
        ("fingerprints", lambda mp: mp.setattr(fingerprints, "relevant_faults", _explode)),
    ],
)
def test_a_diagnosis_step_that_raises_leaves_a_note_not_a_crash(
    tmp_path, monkeypatch, step, breaks
):
    breaks(monkeypatch)
    case = make_case(tmp_path, "x * y", XY)
    result = check(case, lambda: FaultyEngine(FAULTS["mul.self"]))
    assert result.status == "failed"
    assert f"diagnosis step {step!r} failed (RuntimeError: diagnosis exploded)" in result.message
    assert result.hints, "the other steps still explain the failure"
    if step != "fingerprints":
        assert result.hints[0].code == "fault:mul.self"


# -- folding: consequences of the top hint are not its rivals ---------------------------


def test_a_fingerprint_folds_what_it_explains(tmp_path):
    case = make_case(tmp_path, "x + b", {"x": normal(2, 3), "b": normal(3)})
    result = check(case, lambda: FaultyEngine(FAULTS["broadcast.no-reduce"]))
    top = result.hints[0]
    assert top.code == "fault:broadcast.no-reduce"
    # missing-unbroadcast and the node's op-vjp follow from the fault: under it, not beside
    assert {"missing-unbroadcast", "op-vjp"} <= set(codes(top.also))
    assert not {"missing-unbroadcast", "op-vjp"} & set(codes(result.hints))
    [vjp] = [h for h in top.also if h.code == "op-vjp"]
    assert (vjp.op, vjp.arg, vjp.mechanism) == ("add", 1, "fault:broadcast.no-reduce")


def test_nan_mismatch_merges_into_the_nodes_nan_region(tmp_path):
    # sigmoid's VJP written as exp(-t) / (1 + exp(-t))**2: inf / inf once exp(-t) overflows
    engine = with_vjp("sigmoid", 0, lambda g, ans, t: g * np.exp(-t) / (1 + np.exp(-t)) ** 2)
    inputs = {"x": [[-800.0, 1.0, 2.0], [0.5, -900.0, 3.0]], "y": [[0.1, 0.2, 0.3]] * 2}
    result = check(make_case(tmp_path, "sigmoid(x - y) * y", inputs), engine)
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "sigmoid", "nan-region")
    assert top.region == "exp(-(x - y)) overflows"  # told apart from `x - y < 0` on a grid
    assert "nan-mismatch" in codes(top.also)
    assert "nan-mismatch" not in codes(result.hints)
    assert input_hints(result, "x")[0].code == "nan-mismatch"  # the input's own hints keep it


def test_two_failing_nodes_are_both_named_not_folded(tmp_path):
    class TwoBugs(BuiltinEngine):
        def vjp_rule(self, op, i):
            if op.name == "exp":
                return lambda g, ans, x: ans  # ignores upstream
            if op.name == "sin":
                return lambda g, ans, x: -g * np.cos(x)  # sign
            return super().vjp_rule(op, i)

    result = check(make_case(tmp_path, "exp(x) * sin(y)", XY), TwoBugs)
    localised = {(h.op, h.mechanism) for h in result.hints if h.code == "op-vjp"}
    assert localised == {("exp", "ignores-upstream"), ("sin", "sign-flip")}


# -- errors get a diagnosis ------------------------------------------------------------------


def test_an_engine_whose_grad_always_raises_is_a_driver_problem(tmp_path):
    from engines_for_tests import RaisingGrad

    [result] = run([make_case(tmp_path, "exp(x) * y", XY)], RaisingGrad, RunOptions()).cases
    assert result.status == "error"
    [top] = result.hints
    assert (top.code, top.confidence) == ("backprop-driver", "likely")
    assert "raises on every op node checked alone" in top.message
    assert [n.status for n in result.nodes] == ["error", "error"]


def test_an_error_in_one_rule_is_localised_to_its_node_and_argument(tmp_path):
    def boom(g, ans, a, b):
        raise ValueError("no VJP for b here")

    case = make_case(
        tmp_path, "exp(x) / y", {"x": normal(2, 3), "y": {"shape": [2, 3], "init": "positive"}}
    )
    [result] = run([case], with_vjp("div", 1, boom), RunOptions()).cases
    assert result.status == "error"
    top = result.hints[0]
    assert (top.code, top.op, top.arg, top.mechanism) == ("op-vjp", "div", 1, "raises")
    assert "no VJP for b here" in top.message
    assert "`-g * a / b**2`" in top.fix
    assert [(n.op, n.status, n.args) for n in result.nodes] == [
        ("exp", "passed", []),
        ("div", "error", [1]),
    ]


def test_an_error_case_without_diagnosis_has_no_hints(tmp_path):
    from engines_for_tests import RaisingGrad

    case = make_case(tmp_path, "exp(x) * y", XY)
    [result] = run([case], RaisingGrad, RunOptions(diagnose=False)).cases
    assert result.status == "error" and result.hints == [] and result.nodes == []
