"""The fault catalogue (SPEC §6) is self-consistent: every fault is documented, really
changes the builtin engine's gradients, and is the first thing diagnosis names when an
engine has exactly that bug.

`FAULT_CASES` gives every fault a small case (float64, random cotangent) chosen so that
no other fault of the catalogue reproduces the same numbers. Where a natural case would
not separate two faults, the case says how it was chosen:

* broadcast.leading-only vs broadcast.no-reduce: with no extra leading axes both leave
  the gradient in the broadcast shape, so b needs leading axes *and* a size-1 axis.
* mean.total-size: with axis=None the input's size *is* the reduced size, so it is correct;
  the case reduces one axis only.
* sum.no-expand: broadcasting a sum over axis 0 back is right by accident; over axis 1 of
  a square input it puts each row's gradient along the columns.
* matmul.no-batch-reduce vs broadcast.leading-only (which also covers matmul): y's extra
  axis is a leading one, which leading-only sums correctly.
* backprop.no-accumulate / backprop.traversal-order: a diamond (h used twice) is needed
  for either to matter; traversal-order needs a consumer of h that is reached after h.
* relu.kink and max.all-ties only show at a kink or a tie, so their inputs are literals
  with exact zeros / exact ties; pow.divides-by-base only differs where the base is 0.
* maximum.mask-only / max.mask-only vs backprop.no-upstream: on a lone op both feed the
  VJP no cotangent; an op after it (`* z`) feeds no-upstream's ones to mul as well.

`test_indistinguishable_faults_are_all_reported` pins the one pair that no data can tell
apart on a case without leading broadcast axes.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from fault_cases_norms import NORM_CASES
from fault_cases_windows import WINDOW_CASES
from gradcheck.cases import Case, load_file
from gradcheck.comparison.compare import compare
from gradcheck.diagnosis.faults.fingerprints import used_ops
from gradcheck.diagnosis.faults.planted import CATALOGUE, FAULTS, Fault, FaultyEngine
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.reverse import run_engine
from gradcheck.ops import has_op
from gradcheck.runner import RunOptions, run
from spec_contract import SPEC_FAULTS

SHARED_STEPS = ("broadcast", "backprop", "jvp")  # fault prefixes that are not ops
# Reverse mode's faults; forward mode's (check "jvp") are tested in test_forward_mode.py.
VJP_FAULTS = {f.name: f for f in CATALOGUE if f.check == "vjp"}


def normal(*shape: int) -> dict:
    return {"shape": list(shape)}


def positive(*shape: int) -> dict:
    return {"shape": list(shape), "init": "positive"}


# The seed's question (SPEC, seed/): matmul(matmul(x, y), z) with batched x and z.
SEED_INPUTS = {
    "x": [[[1.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]],
    "y": [[3.0, -7.0], [-1.0, 5.0]],
    "z": [[[1.0, 1.0], [2.0, 2.0]], [[3.0, 3.0], [-1.0, -1.0]]],
}

FAULT_CASES: dict[str, dict] = {
    "matmul.full-transpose": {"expr": "matmul(matmul(x, y), z)", "inputs": SEED_INPUTS},
    "matmul.no-batch-reduce": {
        "expr": "x @ y",
        "inputs": {"x": normal(2, 3, 4), "y": normal(4, 5)},
    },
    "broadcast.no-reduce": {"expr": "x + b", "inputs": {"x": normal(2, 3), "b": normal(3)}},
    "broadcast.leading-only": {
        "expr": "x * b",
        "inputs": {"x": normal(2, 3, 4), "b": normal(3, 1)},
    },
    "mul.self": {"expr": "x * y", "inputs": {"x": normal(2, 3), "y": normal(2, 3)}},
    "sub.sign": {"expr": "x - y", "inputs": {"x": normal(2, 3), "y": normal(2, 3)}},
    "div.sign": {"expr": "x / y", "inputs": {"x": normal(2, 3), "y": positive(2, 3)}},
    "div.square": {"expr": "x / y", "inputs": {"x": normal(2, 3), "y": positive(2, 3)}},
    "pow.exponent": {"expr": "x ** 3", "inputs": {"x": positive(2, 3)}},
    "tanh.from-input": {"expr": "tanh(x)", "inputs": {"x": normal(2, 3)}},
    "sigmoid.from-input": {"expr": "sigmoid(x)", "inputs": {"x": normal(2, 3)}},
    "relu.kink": {"expr": "relu(x)", "inputs": {"x": [[-1.0, 0.0, 2.0], [0.0, 3.0, -2.0]]}},
    "log.inverted": {"expr": "log(x)", "inputs": {"x": positive(2, 3)}},
    "sqrt.no-half": {"expr": "sqrt(x)", "inputs": {"x": positive(2, 3)}},
    "mean.no-divide": {"expr": "mean(x, axis=1)", "inputs": {"x": normal(2, 3)}},
    "mean.total-size": {"expr": "mean(x, axis=1)", "inputs": {"x": normal(2, 3)}},
    "sum.no-expand": {"expr": "sum(x, axis=1)", "inputs": {"x": normal(3, 3)}},
    "max.all-ties": {
        "expr": "max(x, axis=1)",
        "inputs": {"x": [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]},
    },
    "softmax.diagonal": {"expr": "softmax(x)", "inputs": {"x": normal(2, 4)}},
    "log_softmax.no-softmax": {"expr": "log_softmax(x)", "inputs": {"x": normal(2, 4)}},
    "transpose.perm-not-inverted": {
        "expr": "transpose(x, perm=[1, 2, 0])",
        "inputs": {"x": normal(2, 3, 4)},
    },
    "matmul.untransposed": {"expr": "x @ y", "inputs": {"x": normal(3, 3), "y": normal(3, 3)}},
    "broadcast.leading-kept": {
        "expr": "x * b",
        "inputs": {"x": normal(2, 3, 4), "b": normal(3, 1)},
    },
    "div.numerator-self": {"expr": "x / y", "inputs": {"x": normal(2, 3), "y": positive(2, 3)}},
    "pow.divides-by-base": {
        "expr": "x ** 3",
        "inputs": {"x": [[0.0, 1.5, -2.0], [0.5, 0.0, 2.0]]},
    },
    "pow.power-rule-exponent": {
        "expr": "x ** y",
        "inputs": {"x": positive(2, 3), "y": positive(2, 3)},
    },
    "maximum.mask-only": {
        "expr": "maximum(x, y) * z",
        "inputs": {"x": normal(2, 3), "y": normal(2, 3), "z": normal(2, 3)},
    },
    "maximum.inverted": {"expr": "minimum(x, y)", "inputs": {"x": normal(2, 3), "y": normal(2, 3)}},
    "cos.sign": {"expr": "cos(x)", "inputs": {"x": normal(2, 3)}},
    "relu.gradient-mask": {"expr": "relu(x)", "inputs": {"x": normal(3, 4)}},
    "mean.first-axis": {"expr": "mean(x, axis=1)", "inputs": {"x": normal(2, 3)}},
    "max.mask-only": {"expr": "max(x, axis=1) * z", "inputs": {"x": normal(2, 3), "z": normal(2)}},
    "softmax.pass-through": {"expr": "softmax(x)", "inputs": {"x": normal(2, 4)}},
    "log_softmax.dot-output": {"expr": "log_softmax(x)", "inputs": {"x": normal(2, 4)}},
    "reshape.no-reshape": {"expr": "reshape(x, shape=[3, 2])", "inputs": {"x": normal(2, 3)}},
    "getitem.slice-shape": {"expr": "x[0, 1:3]", "inputs": {"x": normal(3, 4)}},
    "concat.first-axis": {
        "expr": "concat([x, y], axis=1)",
        "inputs": {"x": normal(2, 3), "y": normal(2, 2)},
    },
    "backprop.no-accumulate": {"expr": "h = exp(x)\nh * sin(h)", "inputs": {"x": normal(2, 3)}},
    "backprop.traversal-order": {"expr": "h = exp(x)\nh + sin(h)", "inputs": {"x": normal(2, 3)}},
    "backprop.no-upstream": {"expr": "sin(exp(x))", "inputs": {"x": normal(2, 3)}},
    **NORM_CASES,
    **WINDOW_CASES,
}


def write_cases(path: Path, specs: dict[str, dict]) -> dict[str, Case]:
    cases = [
        {"name": name, "cotangent": "random", "dtype": "float64", **spec}
        for name, spec in specs.items()
    ]
    path.write_text(yaml.safe_dump({"cases": cases}, sort_keys=False))
    loaded = load_file(path)
    invalid = [item for item in loaded if not isinstance(item, Case)]
    assert not invalid, invalid
    return {case.name: case for case in loaded}  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def fault_cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    return write_cases(tmp_path_factory.mktemp("faults") / "faults.yaml", FAULT_CASES)


def faulty(fault: Fault):
    return lambda: FaultyEngine(fault)


class LeavesOnly(FaultyEngine):
    """The faulty builtin engine, refusing gradients with respect to intermediate nodes."""

    def grad(self, output, wrt, cotangent):
        if any(t.op is not None for t in wrt):
            raise ValueError("gradients of leaves only")
        return super().grad(output, wrt, cotangent)


# Driver faults that driver localisation names by node and mechanism when the engine gives
# intermediate gradients (SPEC §6.1); their fingerprints then are not tried.
LOCATED = {"backprop.no-accumulate": "no-accumulate", "backprop.traversal-order": "per-path"}


# -- the catalogue itself ------------------------------------------------------------------


def test_every_spec_minimum_fault_is_in_the_catalogue():
    missing = [name for name in SPEC_FAULTS if name not in FAULTS]
    assert not missing, f"faults SPEC §6 requires but the catalogue lacks: {missing}"


def test_fault_names_are_unique_and_well_formed():
    names = [fault.name for fault in CATALOGUE]
    assert len(names) == len(set(names))
    assert list(FAULTS) == names
    for fault in CATALOGUE:
        # an op's name may hold digits (conv2d, max_pool2d); a variant's does not
        assert re.fullmatch(r"[a-z][a-z0-9_]*\.[a-z-]+", fault.name), fault.name
        prefix = fault.name.split(".")[0]
        assert has_op(prefix) or prefix in SHARED_STEPS, fault.name
        assert fault.code == f"fault:{fault.name}"


@pytest.mark.parametrize("fault", CATALOGUE, ids=lambda f: f.name)
def test_every_fault_is_documented_and_changes_one_thing(fault: Fault):
    assert fault.summary.strip() and fault.fix.strip()
    assert fault.summary != fault.fix
    # exactly one seam changed: VJP rules, the unbroadcast step, or the backward driver;
    # in forward mode JVP rules or the broadcast of the tangent
    seams = [bool(fault.vjps), fault.reduce is not None, fault.driver is not None]
    seams += [bool(fault.jvps), bool(fault.unbroadcast_tangent)]
    assert sum(seams) == 1, fault.name
    assert (fault.check == "jvp") == (bool(fault.jvps) or bool(fault.unbroadcast_tangent))
    assert bool(fault.reduce_ops) == (fault.reduce is not None)
    prefix = fault.name.split(".")[0]
    if fault.driver is not None:
        assert prefix == "backprop"
    elif has_op(prefix):
        assert prefix in fault.ops, f"{fault.name} does not touch {prefix}"


def test_every_fault_beyond_the_spec_documents_a_real_bug_class():
    """The catalogue grows by bugs people make: each new entry points at a public report."""
    beyond = [f for f in CATALOGUE if f.name not in SPEC_FAULTS]
    assert len(beyond) >= 12
    for fault in beyond:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", fault.seen), (fault.name, fault.seen)
        assert "`" in fault.fix, fault.name  # the fix holds the code to write


def test_every_fault_has_a_case():
    assert set(FAULT_CASES) == set(VJP_FAULTS)


# -- each fault on its case ----------------------------------------------------------------


def test_the_correct_engine_passes_every_fault_case_without_hints(fault_cases):
    result = run(list(fault_cases.values()), BuiltinEngine, RunOptions())
    for case in result.cases:
        assert case.status == "passed", (case.name, case.message)
        assert case.hints == []
        assert case.nodes == []
        assert all(item.hints == [] for item in case.inputs)


@pytest.mark.parametrize("name", list(FAULT_CASES))
def test_the_fault_really_changes_the_gradients(fault_cases, name):
    case = fault_cases[name]
    args = (case.expression, case.inputs, case.wrt, case.cotangent)
    right = run_engine(BuiltinEngine(), *args)
    wrong = run_engine(FaultyEngine(FAULTS[name]), *args)
    assert compare(right.forward, wrong.forward, case.tolerance).passed  # backward-only bugs
    differ = [
        n for n in case.wrt if not compare(right.grads[n], wrong.grads[n], case.tolerance).passed
    ]
    assert differ, f"{name} gives the right gradients on its own case"


@pytest.mark.parametrize("name", list(FAULT_CASES))
def test_each_fault_fingerprints_itself_first(fault_cases, name):
    fault = FAULTS[name]
    factory = (lambda: LeavesOnly(fault)) if name in LOCATED else faulty(fault)
    [result] = run([fault_cases[name]], factory, RunOptions()).cases
    assert result.status == "failed", result.message
    assert result.message == ""  # no diagnosis step failed
    top = result.hints[0]
    assert top.code == f"fault:{name}", [h.code for h in result.hints]
    assert top.confidence == "exact"
    assert top.fix == fault.fix
    # a shared step's fault is said at the op it struck at first: "mul's VJP does not ..."
    lead = f"{fault.at_op.format(op=top.op, axes='axes')}: " if fault.at_op else ""
    assert top.message.startswith(lead + fault.summary)
    prefix = name.split(".")[0]
    if has_op(prefix):
        # the fault's op the case uses: maximum.inverted's case is a minimum
        assert top.op in fault.ops & used_ops(fault_cases[name])
        assert top.op == prefix or prefix not in used_ops(fault_cases[name])
    # the case separates this fault from every other one in the catalogue
    fingerprints = [h.code for h in result.hints if h.code.startswith("fault:")]
    assert fingerprints == [fault.code]
    # and each failing input's own hints lead with it too
    failing = [item for item in result.inputs if item.status == "failed"]
    assert failing
    for item in failing:
        assert item.hints[0].code == fault.code, (item.name, [h.code for h in item.hints])


@pytest.mark.parametrize("name", list(LOCATED))
def test_a_driver_fault_is_located_instead_where_the_engine_gives_intermediate_gradients(
    fault_cases, name
):
    [result] = run([fault_cases[name]], faulty(FAULTS[name]), RunOptions()).cases
    top = result.hints[0]
    assert (top.code, top.mechanism, top.confidence) == ("backprop-driver", LOCATED[name], "exact")
    assert top.node is not None
    assert not [h.code for h in result.hints if h.code.startswith("fault:")]


@pytest.mark.parametrize("name", list(LOCATED))
def test_without_intermediate_gradients_the_driver_hint_says_why_it_is_less_precise(
    fault_cases, name
):
    [result] = run([fault_cases[name]], lambda: LeavesOnly(FAULTS[name]), RunOptions()).cases
    [driver] = [h for h in [*result.hints, *result.hints[0].also] if h.code == "backprop-driver"]
    assert driver.mechanism == "unknown" and driver.node is None
    assert "less precise" in driver.message and "gradients of leaves only" in driver.message


def test_the_seed_fingerprint_names_the_matmul_node(fault_cases):
    fault = FAULTS["matmul.full-transpose"]
    [result] = run([fault_cases[fault.name]], faulty(fault), RunOptions()).cases
    # all three of the seed's gradients are wrong, and the one fault explains all three
    assert [item.status for item in result.inputs] == ["failed"] * 3
    assert result.hints[0].code == "fault:matmul.full-transpose"
    assert result.hints[0].node is None  # two matmul nodes: the fault names no single one
    assert {n.op for n in result.nodes if n.status == "failed"} == {"matmul"}


def test_a_fingerprint_names_the_node_when_the_op_is_used_once(fault_cases):
    fault = FAULTS["mean.no-divide"]
    [result] = run([fault_cases[fault.name]], faulty(fault), RunOptions()).cases
    assert result.hints[0].code == fault.code
    assert (result.hints[0].op, result.hints[0].node) == ("mean", "mean(x, axis=1)")


def test_indistinguishable_faults_are_all_reported(tmp_path):
    # b has no leading broadcast axes, so "sum over the leading axes only" sums nothing:
    # leading-only and no-reduce both hand back the (3, 4) share. No data separates them,
    # so both must be reported as exact fingerprints.
    cases = write_cases(
        tmp_path / "same.yaml",
        {"same": {"expr": "x + b", "inputs": {"x": normal(3, 4), "b": normal(3, 1)}}},
    )
    for name in ("broadcast.leading-only", "broadcast.no-reduce"):
        [result] = run(list(cases.values()), faulty(FAULTS[name]), RunOptions()).cases
        exact = {h.code for h in result.hints if h.confidence == "exact"}
        assert {"fault:broadcast.leading-only", "fault:broadcast.no-reduce"} <= exact
        assert result.hints[0].code.startswith("fault:broadcast.")


def test_a_fault_whose_op_is_absent_changes_nothing(tmp_path):
    # A fault is switched on in one place only: on sin(x) every op fault is harmless.
    case = write_cases(
        tmp_path / "sin.yaml", {"sin": {"expr": "sin(x)", "inputs": {"x": normal(2, 3)}}}
    )["sin"]
    args = (case.expression, case.inputs, case.wrt, case.cotangent)
    right = run_engine(BuiltinEngine(), *args).grads["x"]
    for fault in CATALOGUE:
        if fault.driver is None:
            got = run_engine(FaultyEngine(fault), *args).grads["x"]
            np.testing.assert_array_equal(got, right, err_msg=fault.name)


@pytest.mark.parametrize("name", [n for n in FAULTS if n.startswith("broadcast.")])
def test_an_unbroadcast_fault_reaches_broadcast_to_as_it_reaches_the_binary_ops(tmp_path, name):
    # broadcast_to's VJP, like add's, gives the gradient in the broadcast shape and leaves
    # summing it back to the one unbroadcast step: a fault there changes both alike.
    fault = FAULTS[name]
    cases = write_cases(
        tmp_path / "shared.yaml",
        {
            "to": {"expr": "broadcast_to(x, shape=[2, 3, 4])", "inputs": {"x": normal(3, 1)}},
            "add": {"expr": "x + z", "inputs": {"x": normal(3, 1), "z": normal(2, 3, 4)}},
        },
    )
    for case in cases.values():
        args = (case.expression, case.inputs, case.wrt, case.cotangent)
        got = run_engine(FaultyEngine(fault), *args).grads["x"]
        np.testing.assert_array_equal(got, fault.reduce(case.cotangent, (3, 1)), err_msg=case.name)
        right = run_engine(BuiltinEngine(), *args).grads["x"]
        assert got.shape != right.shape or not np.allclose(got, right), case.name
