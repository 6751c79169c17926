"""Subgradient conventions at kinks and ties (SPEC §4, §6.1).

* ops/conventions.py: each convention's VJP does what it says, and its `subgradient`
  flag is whether its parts sum to the upstream gradient;
* correct engines that follow other conventions pass every shipped case and the tie
  and kink cases when their adapters declare them (with a `convention` note where it
  mattered), and fail exactly the kink cases, each with the `kink` mechanism that names
  their choice, when they do not;
* real engines gradcheck did not write (mygrad, PyTorch, JAX, HIPS autograd) the same
  way (the stock adapters' shipped suite is test_stock_engines.py's), and autograd's
  open broadcast_to bug (HIPS/autograd#384) is localised, not a crash;
* a declaration that is wrong is an error at load time, and one that does not match
  what the engine does is said so.
"""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import load_file
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.loading import load_engine
from gradcheck.engines.reverse import run_engine
from gradcheck.errors import UsageError
from gradcheck.expression import parse
from gradcheck.ops import get_op
from gradcheck.ops.conventions import CONVENTIONS, TENSORFLOW, check_declared
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parents[1]
KINK_CASES = [ROOT / "tests/corpus/cases/conventions.yaml", ROOT / "cases/kinks.yaml"]
SHIPPED = sorted((ROOT / "cases").glob("*.yaml"))
CORPUS = "tests/corpus/convention_engines.py"
REAL = "tests/real_engines"

# Which op each kink case puts at its kink.
CASE_OP = {
    "relu_zeros": "relu", "abs_zeros": "abs", "maximum_ties": "maximum",
    "minimum_ties": "minimum", "maximum_with_zero": "maximum", "max_ties": "max",
    "min_ties": "min", "pow_negative_base": "pow", "relu_at_zero": "relu",
    "relu_of_integer_difference": "relu", "abs_at_zero": "abs",
    "abs_integers_scaled": "abs", "max_ties_rows": "max", "min_ties_all": "min",
    "max_ties_integers_keepdims": "max", "min_ties_negative_axis": "min",
    "maximum_minimum_ties": "maximum", "maximum_as_relu": "maximum", "clip_at_bounds": "clip",
    "leaky_relu_at_zero": "leaky_relu", "elu_at_zero": "elu", "selu_at_zero": "selu",
    "max_pool2d_ties_first": "max_pool2d", "max_pool1d_ties_same": "max_pool1d",
}  # fmt: skip


def passed_or_lacks_the_op(case) -> bool:
    """Passed, or skipped because the engine has no method for the op (the corpus's small
    engines predate clip)."""
    return case.status == "passed" or (
        case.status == "skipped" and case.message.startswith("unsupported: engine has no method")
    )


@cache
def kink_cases() -> list:
    return [c for path in KINK_CASES for c in load_file(path)]


@cache
def shipped_cases() -> list:
    return [c for path in SHIPPED for c in load_file(path)]


def engine(spec: str):
    path, _, name = spec.partition(":")
    return load_engine(f"{ROOT / path}:{name}")


def undeclared(spec: str):
    """The same engine class without its declaration."""
    base = engine(spec)
    return type(f"{base.__name__}Undeclared", (base,), {"conventions": {}})


def quietly(cases, factory):
    with warnings.catch_warnings():  # real engines warn about log(negative) in pow
        warnings.simplefilter("ignore", RuntimeWarning)
        # Each case in full: the tests read every case's own diagnosis, not the run's.
        return run(cases, factory, RunOptions(diagnose="all"))


# -- the conventions themselves ------------------------------------------------------------


def shares(op_name: str, name: str, args: list[np.ndarray], **attrs) -> list[np.ndarray]:
    """Each argument's gradient under convention `name`, for the cotangent ones."""
    engine = BuiltinEngine({op_name: name})
    leaves = [engine.leaf(f"a{i}", a) for i, a in enumerate(args)]
    out = getattr(engine, op_name)(*leaves, **attrs)
    return engine.grad(out, leaves, np.ones_like(out.value))


@pytest.mark.parametrize("op_name", ["maximum", "minimum"])
def test_tie_conventions_give_each_side_its_share(op_name):
    a, b = np.array([1.0, 2.0]), np.array([1.0, 0.0])  # a tie, then a clear winner
    a_off = 1.0 if op_name == "maximum" else 0.0  # a's share where a = 2 beats b = 0
    expected = {
        "first": (1, 0),
        "split": (0.5, 0.5),
        "second": (0, 1),
        "none": (0, 0),
        "all": (1, 1),
    }
    assert set(expected) == set(CONVENTIONS[op_name])
    for name, (at_a, at_b) in expected.items():
        ga, gb = shares(op_name, name, [a, b])
        assert (ga[0], gb[0]) == (at_a, at_b), name
        assert (ga[1], gb[1]) == (a_off, 1 - a_off), name  # off the tie: the winner's
        assert CONVENTIONS[op_name][name].subgradient == (at_a + at_b == 1), name


@pytest.mark.parametrize("op_name", ["max", "min"])
def test_reduction_conventions_over_a_three_way_tie(op_name):
    x = np.array([[2.0, 2.0, 2.0], [1.0, 3.0, 0.0]])
    expected = {"split": [1 / 3] * 3, "first": [1, 0, 0], "last": [0, 0, 1], "all": [1, 1, 1]}
    assert set(expected) == set(CONVENTIONS[op_name])
    for name, row in expected.items():
        (g,) = shares(op_name, name, [x], axis=1, keepdims=False)
        np.testing.assert_allclose(g[0], row, err_msg=name)
        assert CONVENTIONS[op_name][name].subgradient == np.isclose(sum(row), 1), name


@pytest.mark.parametrize(
    ("op_name", "values"), [("relu", (0.0, 0.5, 1.0)), ("abs", (0.0, 0.5, 1.0))]
)
def test_zero_conventions_give_the_named_derivative_at_zero(op_name, values):
    x = np.array([-1.0, 0.0, 2.0])
    for name, at_zero in zip(("zero", "half", "one"), values, strict=True):
        (g,) = shares(op_name, name, [x])
        off = [0.0, 1.0] if op_name == "relu" else [-1.0, 1.0]
        assert (g[0], g[1], g[2]) == (off[0], at_zero, off[1]), name


def test_pow_nan_convention_is_nan_only_where_the_base_is_negative():
    a, b = np.array([-2.0, 0.0, 2.0]), np.array([2.0, 2.0, 2.0])
    _, tf_style = shares("pow", "zero", [a, b])
    _, nan = shares("pow", "nan", [a, b])
    assert tf_style[:2].tolist() == [0.0, 0.0]
    assert np.isnan(nan[0]) and nan[1] == 0.0
    assert nan[2] == tf_style[2] == pytest.approx(4 * np.log(2))


def test_tensorflows_convention_is_the_registry_vjp():
    for op_name, name in TENSORFLOW.items():
        assert not CONVENTIONS[op_name][name].vjps, op_name  # no override: the registry's
        assert get_op(op_name).kink is not None, op_name


# -- corpus engines with other conventions -------------------------------------------------

# engine -> {case: expected kink mechanism} for the cases its undeclared twin fails
CORPUS_ENGINES = {
    "TapeSplit": {"relu": "relu:half", "abs": "abs:one", "maximum": "maximum:split",
                  "minimum": "minimum:split"},
    "ClosureFirst": {"max": "max:first", "min": "min:last", "pow": "pow:nan"},
    "TfOpSecond": {"maximum": "maximum:second", "minimum": "minimum:none",
                   "relu": "relu:one", "max": "max:all"},
}  # fmt: skip
# Under these the catalogue has a fault that is the same choice: it leads, the kink folded.
SAME_AS_FAULT = {"relu:one": "fault:relu.kink", "max:all": "fault:max.all-ties"}


@pytest.mark.parametrize("name", list(CORPUS_ENGINES))
def test_declared_conventions_pass_every_shipped_and_kink_case(name):
    result = quietly(shipped_cases() + kink_cases()[:8], engine(f"{CORPUS}:{name}"))
    bad = [f"{c.name}: {c.status} {c.message}" for c in result.cases if not c.passed]
    assert not bad, bad
    noted = {c.name for c in result.cases if any(i.hints for i in c.inputs)}
    # a convention note wherever a declared convention changed the answer
    assert noted, "no convention note at all"
    for case in result.cases:
        for item in case.inputs:
            for hint in item.hints:
                assert hint.code == "convention" and hint.confidence == "exact"
                assert "declared conventions" in hint.message
        if case.name in noted:
            assert case.hints == [] and "declared conventions" in case.message


@pytest.mark.parametrize("name", list(CORPUS_ENGINES))
def test_undeclared_conventions_fail_the_kink_cases_with_the_right_mechanism(name):
    expected = CORPUS_ENGINES[name]
    result = quietly(kink_cases(), undeclared(f"{CORPUS}:{name}"))
    for case in result.cases:
        op_name = CASE_OP[case.name]
        if op_name not in expected:
            assert passed_or_lacks_the_op(case), (case.name, case.message)
            continue
        if case.name == "maximum_as_relu" and expected[op_name] == "maximum:split":
            assert case.status == "passed"  # the case that hides a split, see below
            continue
        assert case.status == "failed", case.name
        top = case.hints[0]
        mechanism = expected[op_name]
        if mechanism in SAME_AS_FAULT:
            assert top.code == SAME_AS_FAULT[mechanism]
            top = next(h for h in top.also if h.code == "kink")
        assert (top.code, top.op, top.mechanism) == ("kink", op_name, mechanism), case.name
        convention = CONVENTIONS[op_name][mechanism.split(":")[1]]
        assert convention.does in top.message
        valid = "is a valid subgradient" if convention.subgradient else "is not a valid"
        assert valid in top.message


def test_a_kink_case_separates_split_from_tensorflows_choice_at_maximum_x_0():
    # maximum(x, 0) + minimum(0, x): a split's 0.5 + 0.5 equals TF's 1 + 0 and hides;
    # maximum(x, 0) alone does not
    cases = {c.name: c for c in kink_cases()}
    split = undeclared(f"{CORPUS}:TapeSplit")
    hidden, shown = quietly([cases["maximum_as_relu"], cases["maximum_with_zero"]], split).cases
    assert hidden.status == "passed"
    assert shown.status == "failed" and shown.hints[0].mechanism == "maximum:split"


def test_a_declaration_that_is_not_what_the_engine_does_is_said_so(tmp_path):
    path = tmp_path / "liar.py"
    path.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests/corpus')!r})\n"
        "from convention_engines import TapeSplit\n"
        "class Engine(TapeSplit):\n"
        "    conventions = {'maximum': 'second'}\n"
    )
    cases = [c for c in kink_cases() if c.name == "maximum_ties"]
    [case] = quietly(cases, load_engine(str(path))).cases
    assert case.status == "failed"
    top = case.hints[0]
    assert (top.code, top.mechanism) == ("kink", "maximum:split")
    assert "(the adapter declares `second`)" in top.message


@pytest.mark.parametrize(
    ("declared", "says"),
    [
        ({"maximum": "halves"}, "is not one of first, split, second, none, all"),
        ({"tanh": "zero"}, "no convention to choose for 'tanh'"),
        (["maximum"], "must be a dict"),
    ],
)
def test_a_wrong_declaration_is_a_usage_error_at_load_time(tmp_path, declared, says):
    path = tmp_path / "engine.py"
    path.write_text(
        "from gradcheck.engines.builtin import BuiltinEngine\n"
        f"class Engine(BuiltinEngine):\n    conventions = {declared!r}\n"
    )
    with pytest.raises(UsageError, match=says):
        load_engine(str(path))
    with pytest.raises(ValueError, match=says):
        check_declared(declared)


# -- real engines --------------------------------------------------------------------------

# Engines gradcheck did not write: mygrad (its adapter is tests/real_engines/) and the
# ready adapters for PyTorch, JAX and HIPS autograd. Each declares its conventions; what
# each declaration says is probed in tests/test_stock_engines.py (and for mygrad below).
REAL_ENGINES = [f"{ROOT / REAL}/mygrad_engine.py:Engine", "torch", "jax", "autograd"]


def real(spec: str):
    return load_engine(spec)


@pytest.mark.parametrize("spec", REAL_ENGINES, ids=lambda s: s.split("/")[-1])
def test_a_real_engine_with_its_declared_conventions_passes(spec):
    # The stock adapters pass the whole shipped suite in test_stock_engines.py; here
    # they take the kink and tie cases, and mygrad, which has no test there, takes both.
    stock = spec in REAL_ENGINES[1:]
    cases = kink_cases() if stock else shipped_cases() + kink_cases()[:8]
    result = quietly(cases, real(spec))
    bad = [(c.name, c.status, c.message) for c in result.cases if not c.passed]
    assert not bad
    assert sum(c.status == "passed" for c in result.cases) >= (len(cases) if stock else 90)
    assert any(i.hints for c in result.cases for i in c.inputs)  # a declaration mattered


@pytest.mark.parametrize("spec", REAL_ENGINES, ids=lambda s: s.split("/")[-1])
def test_a_real_engine_without_its_declarations_gets_each_convention_named(spec):
    factory = real(spec)
    declared = dict(factory.conventions)
    twin = type(f"{factory.__name__}Undeclared", (factory,), {"conventions": {}})
    result = quietly(kink_cases(), twin)
    seen = set()
    for case in result.cases:
        op_name = CASE_OP[case.name]
        if op_name not in declared:
            assert passed_or_lacks_the_op(case), (case.name, case.message)
            continue
        if case.status == "passed":  # a case where the convention shows nowhere
            continue
        top = case.hints[0]
        assert (top.code, top.mechanism) == ("kink", f"{op_name}:{declared[op_name]}"), case.name
        seen.add(top.mechanism)
    assert seen == {f"{op}:{name}" for op, name in declared.items()}


def test_mygrads_declarations_are_what_it_does():
    # mygrad: a maximum tie to neither side (0/0), a max/min tie to the first element
    factory = real(REAL_ENGINES[0])
    assert shares_of(factory, "maximum", [np.array([2.0]), np.array([2.0])]) == [[0.0], [0.0]]
    assert shares_of(factory, "max", [np.array([3.0, 3.0, 3.0])]) == [[1.0, 0.0, 0.0]]
    assert factory.conventions["maximum"] == "none" and factory.conventions["max"] == "first"


def shares_of(factory, op_name: str, args: list[np.ndarray]) -> list[list[float]]:
    names = [f"a{i}" for i in range(len(args))]
    text = f"{op_name}({', '.join(names)})"
    expression = parse(text, {n: a.shape for n, a in zip(names, args, strict=True)})
    cotangent = np.ones(expression.output.shape)
    got = run_engine(factory(), expression, dict(zip(names, args, strict=True)), names, cotangent)
    return [got.grads[n].tolist() for n in names]


def test_autograds_open_broadcast_to_bug_is_localised_not_a_crash():
    """HIPS/autograd#384 (open since 2018): broadcast_to's VJP cannot add leading axes.
    The ready adapter works around it; without the workaround, gradcheck localises it."""
    import autograd.numpy as anp

    stock = real("autograd")
    plain = type(
        "PlainBroadcast",
        (stock,),
        {"broadcast_to": lambda self, x, shape: anp.broadcast_to(x, tuple(shape))},
    )
    cases = [c for c in shipped_cases() if c.name == "broadcast_to"]
    [case] = quietly(cases, plain).cases
    assert case.status == "error"
    top = case.hints[0]
    assert (top.code, top.op, top.arg, top.mechanism) == ("op-vjp", "broadcast_to", 0, "raises")
    assert "Can't handle extra leading dims" in top.message
    assert "np.sum(g, summed_axes).reshape(x.shape)" in top.fix
