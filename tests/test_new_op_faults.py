"""Every fault of the windowed and indexed ops is named exactly on the shipped cases
(issue 25): planted into the builtin engine, it makes at least one shipped case of its
op fail, and each case it makes fail (or raise) leads with it, `exact`; the others pass.

The planted rules are NumPy code the builtin engine cannot differentiate again, so a
second-order case of the op is skipped as unsupported with them; the first-order cases
are the fault's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck.cases import Case, load_paths
from gradcheck.diagnosis.faults.catalogue import indexing, windows
from gradcheck.diagnosis.faults.planted import Fault, FaultyEngine
from gradcheck.runner import RunOptions, run

SHIPPED = Path(__file__).resolve().parent.parent / "cases"
NEW_FAULTS = (*windows.FAULTS, *indexing.FAULTS)


@pytest.fixture(scope="module")
def shipped() -> list[Case]:
    return [case for case in load_paths([SHIPPED]) if isinstance(case, Case)]


def uses(case: Case, ops: frozenset[str]) -> bool:
    return any(n.op is not None and n.op.name in ops for n in case.expression.op_nodes)


@pytest.mark.parametrize("fault", NEW_FAULTS, ids=lambda f: f.name)
def test_a_planted_fault_is_named_exactly_on_the_shipped_cases_of_its_op(
    shipped: list[Case], fault: Fault
):
    cases = [case for case in shipped if uses(case, fault.ops)]
    assert cases, f"no shipped case uses {sorted(fault.ops)}"
    result = run(cases, lambda: FaultyEngine(fault), RunOptions())
    shown = []
    for case in result.cases:
        if case.status == "passed":
            continue  # the case does not have what the fault gets wrong
        if case.status == "skipped":
            assert "second order" in case.message, (case.name, case.message)
            continue
        assert case.hints, (case.name, case.status, case.message)
        top = case.hints[0]
        assert (top.code, top.confidence) == (fault.code, "exact"), (
            case.name,
            [h.code for h in case.hints],
        )
        shown.append(case.name)
    assert shown, f"no shipped case shows {fault.name}"


def test_autograd_s_historical_take_bug_is_named_take_overwrite(shipped: list[Case]):
    """HIPS/autograd#39 as it was written (`z[indices] += g`), not the catalogue's copy of
    it: on the shipped gathers the diagnosis names it by the catalogue's entry."""
    from planted_engines import TakeAddsBuffered

    cases = [case for case in shipped if uses(case, frozenset({"take"}))]
    result = run(cases, TakeAddsBuffered, RunOptions())
    failed = [case for case in result.cases if case.status == "failed"]
    assert failed
    for case in failed:
        assert case.hints[0].code == "fault:take.overwrite", (case.name, case.hints[0].code)


@pytest.mark.parametrize("name", ["conv", "pooling", "gathers", "products", "layout", "kinks"])
def test_the_corpus_window_engine_passes_the_shipped_cases_of_its_ops_clean(name: str):
    """The base engine of the corpus's window bugs is correct: each bug's failure is its own."""
    from corpus import WINDOW_ENGINE
    from test_corpus import engine

    result = run(load_paths([SHIPPED / f"{name}.yaml"]), engine(WINDOW_ENGINE), RunOptions())
    trouble = [
        (case.name, case.status, case.message)
        for case in result.cases
        if case.status not in ("passed", "skipped") or case.hints
    ]
    assert not trouble
    assert any(case.status == "passed" for case in result.cases)
