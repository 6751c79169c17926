"""The corpus against gradcheck: correct engines pass clean, every planted bug is caught
and explained by the right hint first.

* correct engines: every shipped case (and every corpus case) they support passes, with
  no hint at all; unsupported cases are skipped;
* each bug: its case fails (exit code 1) and the case's first hint is the expected one;
* independently of gradcheck's diagnosis: each bug really changes its base engine's
  results on its case, and, for catalogue faults, the builtin engine with that fault
  reproduces the bug's numbers and no other fault of the catalogue does (so the
  expected `fault:` hint is the only exact fingerprint).
"""

from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from corpus import BUGS, CASES, CORRECT_ENGINES, ROOT, Bug
from gradcheck.cases import load_file
from gradcheck.cases.model import Case, InvalidCase
from gradcheck.cases.selection import matches
from gradcheck.diagnosis.faults.planted import CATALOGUE, FaultyEngine
from gradcheck.engines.driver import EngineFailure, EngineRun
from gradcheck.engines.loading import load_engine
from gradcheck.engines.protocol import EngineFactory
from gradcheck.engines.reverse import run_engine
from gradcheck.runner import RunOptions, run
from spec_contract import SPEC_FAULTS

SHIPPED = sorted((ROOT / "cases").glob("*.yaml"))
CORPUS = sorted((ROOT / CASES).glob("*.yaml"))
# Every fault of the catalogue is planted in the corpus (SPEC §6.3's and the others).
# Reverse mode's faults; forward mode's are planted in test_forward_mode.py.
CATALOGUE_NAMES = [fault.name for fault in CATALOGUE if fault.check == "vjp"]
# SPEC §6.1: the mechanisms of an op-vjp hint, each planted in all three styles.
MECHANISMS = [
    "ignores-upstream",
    "not-linear",
    "identity",
    "zero",
    "scaled",
    "sign-flip",
    "transposed",
    "shape",
    "nan-region",
    "fault:",
    "formula",
]

# SPEC §6.1: how the backward driver goes wrong, and the stale gradients it keeps.
DRIVER_MECHANISMS = [
    "no-accumulate",
    "per-path",
    "early-propagation",
    "missed-node",
    "unknown",
    "not-zeroed",
]


def engine(spec: str) -> EngineFactory:
    """`load_engine` for a spec relative to the repository root, whatever the cwd."""
    path, _, class_name = spec.partition(":")
    return load_engine(f"{ROOT / path}:{class_name}")


@cache
def cases_of(path: Path) -> list[Case | InvalidCase]:
    return load_file(path)


def bug_case(bug: Bug) -> Case:
    """The one case of the bug's file that its `-k` filter selects."""
    selected = [
        c for c in cases_of(ROOT / bug.cases) if bug.k is None or matches(bug.k, c.name, c.tags)
    ]
    assert len(selected) == 1, f"-k {bug.k!r} selects {[c.name for c in selected]}"
    assert isinstance(selected[0], Case), selected[0].message
    return selected[0]


def run_alone(factory: EngineFactory, case: Case) -> EngineRun:
    return run_engine(
        factory(), case.expression, case.inputs, case.wrt, case.cotangent, ask_twice=True
    )


def relpath(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- the registry itself ---------------------------------------------------------------------


def test_registry_covers_the_whole_catalogue():
    planted = {b.hint.removeprefix("fault:") for b in BUGS if b.hint.startswith("fault:")}
    assert planted == set(CATALOGUE_NAMES)
    assert set(SPEC_FAULTS) <= planted


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_registry_plants_every_mechanism_in_every_style(mechanism):
    styles = {
        b.style
        for b in BUGS
        if b.hint == "op-vjp"
        and b.mechanism
        and b.mechanism.startswith(mechanism)
        and b.status == "failed"
    }
    assert styles == {"tape", "closure", "tfop"}, mechanism


@pytest.mark.parametrize("mechanism", DRIVER_MECHANISMS)
def test_registry_plants_every_driver_mechanism_in_a_tape_and_a_closure_engine(mechanism):
    styles = {b.style for b in BUGS if b.mechanism == mechanism and b.node is not None}
    assert {"tape", "closure"} <= styles, mechanism


def test_registry_spreads_bugs_over_styles():
    classes = {(b.style, b.engine) for b in BUGS}
    for style in ("tape", "closure", "tfop"):
        assert sum(s == style for s, _ in classes) >= 6, style
    assert len({b.engine for b in BUGS if not b.hint.startswith("fault:")}) >= 4


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.id)
def test_each_bug_is_one_small_documented_override(bug):
    cls = engine(bug.engine)
    base = cls.__mro__[1]
    assert base.__name__ == "Engine" and base.__module__.endswith(f"{bug.style}_engine")
    assert cls.__doc__ and cls.__doc__.strip(), "say what the bug is in the docstring"
    overrides = [n for n, v in vars(cls).items() if inspect.isfunction(v) and n != "name"]
    assert len(overrides) == 1, f"one bug, one override: {overrides}"


# -- (a) correct engines pass clean ------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED + CORPUS, ids=relpath)
@pytest.mark.parametrize("spec", CORRECT_ENGINES, ids=lambda s: Path(s.split(":")[0]).stem)
def test_correct_engine_passes_without_hints(spec, path):
    result = run(cases_of(path), engine(spec), RunOptions())
    trouble = [
        f"{c.name}: {c.status} {c.message} {[h.code for h in c.hints]}"
        for c in result.cases
        if c.status not in ("passed", "skipped") or c.hints
    ]
    assert not trouble, "\n".join(trouble)
    assert result.exit_code == 0


# -- (b) each bug is caught, and explained first by the expected hint ---------------------------


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.id)
def test_bug_fails_its_case(bug):
    result = run([bug_case(bug)], engine(bug.engine), RunOptions(diagnose=False))
    (case,) = result.cases
    assert case.status == bug.status, f"{case.status}: {case.message}"
    assert result.exit_code == 1


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.id)
def test_bug_top_hint(bug):
    result = run([bug_case(bug)], engine(bug.engine), RunOptions())
    (case,) = result.cases
    assert result.exit_code == 1
    assert case.hints, f"no hints ({case.message})"
    top = case.hints[0]
    listed = [(h.code, h.op, h.arg, h.mechanism, h.confidence) for h in case.hints]
    assert case.status == bug.status
    assert top.code == bug.hint, listed
    if bug.op is not None:
        assert (top.op, top.arg) == (bug.op, bug.arg), listed
    if bug.mechanism is not None:
        assert top.mechanism == bug.mechanism, listed
        # A formula is exact only where the rule was recovered (and shown).
        guess = bug.mechanism == "unknown" or (bug.mechanism == "formula" and not top.got_rule)
        assert top.confidence == ("likely" if guess else "exact"), listed
    if bug.node is not None:
        assert top.node == bug.node, listed


# -- (c) independent of gradcheck's diagnosis: the bug is really planted ------------------------


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True)


def _same_run(a: EngineRun, b: EngineRun) -> bool:
    """Same forward value and same gradients, asked once and asked again."""
    runs = [(a.grads, b.grads), (a.grads_again or {}, b.grads_again or {})]
    return _same(a.forward, b.forward) and all(
        x.keys() == y.keys() and all(_same(x[n], y[n]) for n in x) for x, y in runs
    )


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.id)
def test_bug_changes_its_base_engine_results(bug):
    case = bug_case(bug)
    base = run_alone(engine(bug.base), case)
    if bug.status == "error":  # the base engine copes with the case; the bug raises
        with pytest.raises(EngineFailure):
            run_alone(engine(bug.engine), case)
        return
    assert not _same_run(run_alone(engine(bug.engine), case), base)


FAULT_BUGS = [b for b in BUGS if b.hint.startswith("fault:")]


@pytest.mark.parametrize("bug", FAULT_BUGS, ids=lambda b: b.id)
def test_only_the_named_catalogue_fault_reproduces_the_bug(bug):
    """The builtin engine with the bug's fault gives the bug's numbers; no other fault does.

    This checks the planted bug against the catalogue's definition, and that the case
    leaves gradcheck a single exact fingerprint to report."""
    case = bug_case(bug)
    got = run_alone(engine(bug.engine), case)
    reproducing = [
        fault.name for fault in CATALOGUE if _reproduces(lambda f=fault: FaultyEngine(f), got, case)
    ]
    assert reproducing == [bug.hint.removeprefix("fault:")]


def _reproduces(factory: EngineFactory, got: EngineRun, case: Case) -> bool:
    """Whether `factory`'s engine gives `got`'s gradients on `case`, within its tolerance."""
    try:
        grads = run_alone(factory, case).grads
    except EngineFailure:  # e.g. a full transpose that makes the shapes incompatible
        return False
    tol = case.tolerance
    return all(
        grads[n].shape == g.shape
        and np.allclose(grads[n], g, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
        for n, g in got.grads.items()
    )
