"""The norms', losses', clip's and linear algebra's catalogue faults are named exactly on
the shipped cases (issue 25): planted one at a time into the builtin engine, every shipped
case that uses the fault's op and fails leads with that fault, and at least one fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from fault_cases_norms import NORM_CASES
from gradcheck.cases import Case, load_paths
from gradcheck.diagnosis.faults.fingerprints import used_ops
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.runner import RunOptions, run

CASES_DIR = Path(__file__).resolve().parent.parent / "cases"


@pytest.fixture(scope="module")
def shipped() -> list[Case]:
    return [case for case in load_paths([CASES_DIR]) if isinstance(case, Case)]


@pytest.mark.parametrize("name", list(NORM_CASES))
def test_the_fault_is_named_on_every_shipped_case_it_fails(shipped, name):
    fault = FAULTS[name]
    cases = [case for case in shipped if used_ops(case) & fault.ops]
    assert cases, f"no shipped case uses {sorted(fault.ops)}"
    results = run(cases, lambda: FaultyEngine(fault), RunOptions()).cases
    failed = [r for r in results if r.status != "passed"]
    assert failed, f"{name} fails no shipped case of {sorted(fault.ops)}"
    for result in failed:
        assert result.hints, (result.name, result.status)
        top = result.hints[0]
        # a case the fault makes raise is named at the node that raised, the fault as its
        # mechanism (diagnosis.md: `fault:…` (else `raises`))
        named = top.code if result.status == "failed" else top.mechanism
        assert named == fault.code, (result.name, result.status, top.code, top.mechanism)
