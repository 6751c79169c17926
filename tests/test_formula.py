"""Formula recovery (SPEC §6.1 `formula`): the rule a wrong engine computes, recovered by
probing its node alone, said as `got_rule` beside `want_rule`, and nothing said that the
held-out probes do not confirm.

Each wrong engine is the builtin engine with one VJP (or JVP) replaced by a plausible
mistake the catalogue has no entry for. The recovered text is checked against the planted
rule itself: evaluated as written, in the rule texts' names, on fresh inputs, it must give
what the planted rule gives (an oracle independent of the search).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from case_files import make_case
from gradcheck.cases import Case, load_file
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.diagnosis.localisation.localise import check_nodes
from gradcheck.diagnosis.mechanisms.formula import Recovery
from gradcheck.diagnosis.mechanisms.probes import Prober
from gradcheck.diagnosis.modes.forward import JvpCheck
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.loading import load_engine
from gradcheck.fuzzing import Budget, fuzz_engine
from gradcheck.ops import get_op
from gradcheck.ops.broadcast import normalize_axes
from gradcheck.ops.reductions import reduced_size
from gradcheck.report.html_report import to_html
from gradcheck.report.json_reader import read_run
from gradcheck.report.json_report import to_dict
from gradcheck.report.rich_report import render
from gradcheck.results import RunResult
from gradcheck.runner import RunOptions, run

CASES = Path(__file__).resolve().parents[1] / "cases"


def planted(op_name: str, arg: int, rule, *, jvp: bool = False) -> type[BuiltinEngine]:
    """The builtin engine with `op_name`'s VJP (JVP) for `arg` replaced by `rule`."""

    class Planted(BuiltinEngine):
        name = f"builtin+{op_name}-planted"

        def vjp_rule(self, op, i):
            if not jvp and op.name == op_name and i == arg:
                return rule
            return super().vjp_rule(op, i)

        def jvp_rule(self, op, i):
            if jvp and op.name == op_name and i == arg:
                return rule
            return super().jvp_rule(op, i)

    return Planted


def failing(case: Case, factory, kind=None):
    checks = check_nodes(case, factory, **({"kind": kind} if kind else {}))
    [check] = [c for c in checks if c.result.status == "failed"]
    return check


def rule_value(text: str, op_name: str, args: list, attrs: dict, g, y):
    """A rule text evaluated as written, in the names the registry's docstring defines."""
    op = get_op(op_name)
    names = {"np": np, "g": g, "t": g, "y": y, **attrs, **dict(zip(op.params, args, strict=False))}
    if "keepdims" in attrs:
        x, axes = args[0], normalize_axes(attrs["axis"], args[0].ndim)
        names["kept_shape"] = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
        names["n"] = reduced_size(x.shape, attrs["axis"])
        names["axis"] = axes
    return eval(text, names)


# (expression, inputs, op, argument, the planted wrong rule, the mistake)
POSITIVE = {"shape": [2, 3], "init": "positive"}
NORMAL = {"shape": [2, 3]}
WRONG = [
    ("tanh(x)", {"x": NORMAL}, "tanh", 0, lambda g, ans, x: g * (1 - ans), "forgotten square"),
    ("sigmoid(x)", {"x": NORMAL}, "sigmoid", 0, lambda g, ans, x: g * ans, "factor dropped"),
    (
        "sigmoid(x)",
        {"x": NORMAL},
        "sigmoid",
        0,
        lambda g, ans, x: g * ans * (1 + ans),
        "wrong sign inside",
    ),
    ("exp(x)", {"x": NORMAL}, "exp", 0, lambda g, ans, x: g * x * np.exp(x), "x * exp(x)"),
    ("log(x)", {"x": POSITIVE}, "log", 0, lambda g, ans, x: g / x**2, "1/x**2 for 1/x"),
    ("sqrt(x)", {"x": POSITIVE}, "sqrt", 0, lambda g, ans, x: g * 0.5 / x, "input for output"),
    ("sin(x)", {"x": NORMAL}, "sin", 0, lambda g, ans, x: g * np.sin(x), "f for f'"),
    ("x * y", {"x": NORMAL, "y": NORMAL}, "mul", 1, lambda g, ans, a, b: g * b, "which argument"),
    ("x / y", {"x": NORMAL, "y": POSITIVE}, "div", 0, lambda g, ans, a, b: g * b, "mul for div"),
    (
        "x ** y",
        {"x": POSITIVE, "y": NORMAL},
        "pow",
        1,
        lambda g, ans, a, b: g * b * a ** (b - 1),
        "power rule on the exponent",
    ),
    (
        "mean(x, axis=1)",
        {"x": NORMAL},
        "mean",
        0,
        lambda g, ans, x, axis, keepdims: (
            np.broadcast_to(np.expand_dims(g, 1), x.shape) / x.shape[1] ** 2
        ),
        "divided by n**2",
    ),
    (
        "mean(x, axis=0)",
        {"x": {"shape": [3, 2]}},
        "mean",
        0,
        lambda g, ans, x, axis, keepdims: np.broadcast_to(g, x.shape) * x.shape[0],
        "times n",
    ),
    (
        "sum(x, axis=0)",
        {"x": NORMAL},
        "sum",
        0,
        lambda g, ans, x, axis, keepdims: np.broadcast_to(g, x.shape) * x,
        "sum as a product",
    ),
]


@pytest.mark.parametrize(
    ("expr", "inputs", "op", "arg", "rule", "why"), WRONG, ids=[w[-1] for w in WRONG]
)
def test_a_wrong_rule_is_recovered_and_holds_everywhere(tmp_path, expr, inputs, op, arg, rule, why):
    check = failing(make_case(tmp_path, expr, inputs), planted(op, arg, rule))
    assert check.result.args == [arg]  # only the wrong argument fails: the right one is named
    finding = Prober(check).find(arg)
    assert finding.mechanism == "formula" and finding.confidence == "exact", finding
    assert finding.want_rule == get_op(op).rule(arg)
    assert f"computes `{finding.got_rule}`; the right rule is `{finding.want_rule}`" in finding.says
    # The text reproduces the planted rule on inputs the search never saw.
    rng = np.random.default_rng(7)
    for shape in ((4, 5), (3, 2)):
        args = [rng.uniform(0.5, 2.0, shape) for _ in get_op(op).params]
        attrs = get_op(op).resolve_attrs(check.node.attrs)
        y = get_op(op).forward(*args, **attrs)
        g = rng.standard_normal(np.shape(y))
        want = rule(g, y, *args, **attrs)
        got = rule_value(finding.got_rule, op, args, attrs, g, y)
        np.testing.assert_allclose(np.broadcast_to(got, np.shape(want)), want, rtol=1e-10)


def test_the_fix_names_the_edit_that_mends_the_rule(tmp_path):
    expected = {
        ("tanh", "g * (1 - y)"): "square `y`",
        ("log", "g / x**2"): "do not square `x`",
        ("sqrt", "0.5 * g / x"): "use `y` where it uses `x`",
        ("mul", "g * b"): "use `a` where it uses `b`",
        ("div", "g * b"): "invert `b`",
        ("exp", "g * x * y"): "drop the factor `x`",
    }
    for expr, inputs, op, arg, rule, _ in WRONG:
        check = failing(make_case(tmp_path, expr, inputs), planted(op, arg, rule))
        finding = Prober(check).find(arg)
        if (op, finding.got_rule) in expected:
            assert finding.fix == expected.pop((op, finding.got_rule))
    assert not expected  # every one met


def test_the_hint_says_it_in_every_format(tmp_path):
    case = make_case(tmp_path, "tanh(x) * y", {"x": NORMAL, "y": NORMAL})
    engine = planted("tanh", 0, lambda g, ans, x: g * (1 - ans))
    [result] = run([case], engine, RunOptions()).cases
    [hint] = [h for h in result.hints if h.mechanism == "formula"]
    assert hint.code == "op-vjp" and hint.op == "tanh" and hint.confidence == "exact"
    assert hint.message == (
        "tanh(x): tanh's VJP for argument 0 (x) computes `g * (1 - y)`; "
        "the right rule is `g * (1 - np.tanh(x)**2)`"
    )
    assert hint.fix.startswith("square `y`; tanh's VJP for x is")
    data = hint.to_dict()
    assert (data["got_rule"], data["want_rule"]) == ("g * (1 - y)", "g * (1 - np.tanh(x)**2)")
    report = RunResult(engine="e", reference="tensorflow", cases=[result], duration_s=0.0)
    back = read_run(to_dict(report, tool_version="test"))
    [read] = [h for h in back.cases[0].hints if h.mechanism == "formula"]
    assert (read.got_rule, read.want_rule) == (hint.got_rule, hint.want_rule)
    assert "computes <code>g * (1 - y)</code>" in to_html(report, tool_version="test")
    buffer = io.StringIO()
    render(report, Console(file=buffer, width=100, force_terminal=False))
    [line] = [
        line for line in buffer.getvalue().splitlines() if "computes" in line and "`" not in line
    ]
    assert "g * (1 - y)" in line


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_float32_rule_is_recovered_and_a_float16_one_is_not_guessed(tmp_path, dtype):
    """float32's rounding still tells `1 - y` from its neighbours; float16's does not,
    and nothing is claimed."""
    case = make_case(tmp_path, "tanh(x)", {"x": NORMAL}, dtype=dtype)
    check = failing(case, planted("tanh", 0, lambda g, ans, x: g * (1 - ans)))
    finding = Prober(check).find(0)
    assert finding.mechanism == "formula"
    if dtype == "float32":
        assert (finding.got_rule, finding.confidence) == ("g * (1 - y)", "exact")
    else:
        assert finding.got_rule is None and finding.confidence == "likely"


def test_the_catalogue_still_wins_where_a_variant_reproduces_the_node(tmp_path):
    case = make_case(tmp_path, "tanh(x)", {"x": NORMAL})
    check = failing(case, lambda: FaultyEngine(FAULTS["tanh.from-input"]))
    finding = Prober(check).find(0)
    assert finding.mechanism == "fault:tanh.from-input" and finding.got_rule is None


def test_nothing_is_claimed_that_no_small_expression_reproduces(tmp_path):
    """Outside the grammar: the worst element, said to be the node's alone, and `likely`."""
    wrong = planted("tanh", 0, lambda g, ans, x: g * (1 - ans**2) + 0.1 * g * np.cos(3 * x))
    check = failing(make_case(tmp_path, "tanh(x)", {"x": NORMAL}), wrong)
    finding = Prober(check).find(0)
    assert finding.mechanism == "formula" and finding.confidence == "likely"
    assert finding.got_rule is None and "checked alone on its own inputs" in finding.says
    index = eval(finding.says.split("at index ")[1].split(" it gives")[0])
    assert f"{float(check.got.grads['a0'][index]):.6g}" in finding.says


def test_a_scaled_rule_is_scaled_only_where_the_factor_holds_on_fresh_inputs(tmp_path):
    """square's VJP without its 2 is 0.5 x everywhere: `scaled`, exact. tanh's without its
    square, on a one-element case, is some factor of the right answer there, and only
    there: the fresh probes refuse the factor, and the rule is recovered instead."""
    half = planted("square", 0, lambda g, ans, x: g * x)
    check = failing(make_case(tmp_path, "square(x)", {"x": NORMAL}), half)
    finding = Prober(check).find(0)
    assert (finding.mechanism, finding.factor, finding.confidence) == ("scaled", 0.5, "exact")
    tiny = make_case(tmp_path, "tanh(x)", {"x": [[0.7]]})
    check = failing(tiny, planted("tanh", 0, lambda g, ans, x: g * (1 - ans)))
    finding = Prober(check).find(0)
    assert (finding.mechanism, finding.got_rule) == ("formula", "g * (1 - y)")


def test_an_identity_seen_only_at_x_equal_1_is_no_identity(tmp_path):
    """`g * x` at x == 1 hands g on unchanged: the fresh probes refuse `identity`."""
    wrong = planted("sigmoid", 0, lambda g, ans, x: g * x)
    check = failing(make_case(tmp_path, "sigmoid(x)", {"x": [[1.0, 1.0]]}), wrong)
    finding = Prober(check).find(0)
    assert (finding.mechanism, finding.got_rule) == ("formula", "g * x")


def test_forward_mode_recovers_a_jvp(tmp_path):
    wrong = planted("tanh", 0, lambda t, ans, x: t * (1 - ans), jvp=True)
    check = failing(make_case(tmp_path, "tanh(x)", {"x": NORMAL}), wrong, JvpCheck)
    finding = Prober(check).find(0)
    assert (finding.mechanism, finding.got_rule) == ("formula", "t * (1 - y)")
    assert finding.want_rule == get_op("tanh").rule(0, mode="fwd")


def test_a_convolution_gives_up_quickly_and_claims_nothing(tmp_path):
    right = BuiltinEngine().vjp_rule(get_op("conv2d"), 0)
    wrong = planted("conv2d", 0, lambda g, ans, x, w, **k: right(g, ans, x, w, **k) * (1 + x))
    case = make_case(
        tmp_path, "conv2d(x, w)", {"x": {"shape": [1, 5, 5, 2]}, "w": {"shape": [3, 3, 2, 2]}}
    )
    check = failing(case, wrong)
    recovery = Recovery(check)
    assert recovery.recover(0) is None
    # quickly: it stops at the kind probe, before any search (bench/diagnosis.py times it)
    assert recovery.family == "other"
    finding = Prober(check).find(0)
    assert finding.got_rule is None and finding.confidence != "exact"


def test_the_shrunk_case_keeps_the_recovered_rule():
    """The issue's learner: after shrinking, the case still says the rule the engine
    computes (not "0.5677 times the right VJP", a factor that fits one element)."""
    wrong = planted("tanh", 0, lambda g, ans, x: g * (1 - ans))
    found = fuzz_engine(wrong, ops=["tanh"], budget=Budget(60, max_bugs=1), seed=0)
    [bug] = found.bugs
    assert bug.reproduced
    top = bug.result.hints[0]
    assert (top.mechanism, top.got_rule) == ("formula", "g * (1 - y)")
    assert "g * (1 - y)" in bug.finding.key[0]


@pytest.mark.parametrize("engine", ["builtin", "torch"])
def test_a_correct_engine_never_gets_a_formula_hint(engine):
    factory = BuiltinEngine if engine == "builtin" else load_engine("torch")
    cases = [
        c
        for name in ("elementwise.yaml", "unary.yaml", "reductions.yaml")
        for c in load_file(CASES / name)
        if isinstance(c, Case)
    ]
    result = run(cases, factory, RunOptions())
    hints = [h for c in result.cases for h in c.hints]
    assert not [h for h in hints if h.mechanism == "formula" or h.got_rule], hints
    assert all(c.status in ("passed", "skipped") for c in result.cases), [
        (c.name, c.status, c.message) for c in result.cases if c.status not in ("passed", "skipped")
    ]
