"""The norms', losses', clip's and linear algebra's catalogue faults are named exactly on
the shipped cases (issue 25): planted one at a time into the builtin engine, every shipped
case that uses the fault's op and fails leads with that fault, and at least one fails.
And the corpus engine they are planted in by hand (tests/corpus/linalg_bugs.py) is correct
where it is not planted: every shipped and corpus case of its ops passes without a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus import LINALG_ENGINE
from fault_cases_norms import NORM_CASES
from gradcheck.cases import Case, load_paths
from gradcheck.diagnosis.faults.fingerprints import used_ops
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.runner import RunOptions, run
from test_corpus import engine

CASES_DIR = Path(__file__).resolve().parent.parent / "cases"
# Where the linalg engine's own ops are: every case of these files it supports.
LINALG_FILES = [
    *(CASES_DIR / f"{name}.yaml" for name in ("normalization", "solvers", "contractions")),
    *(CASES_DIR / f"{name}.yaml" for name in ("comparisons", "gathers", "kinks")),
    CASES_DIR.parent / "tests" / "corpus" / "cases" / "norms_linalg.yaml",
]


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


def test_the_linalg_corpus_engine_passes_the_cases_of_its_ops_without_hints():
    cases = [c for c in load_paths(LINALG_FILES) if isinstance(c, Case)]
    result = run(cases, engine(LINALG_ENGINE), RunOptions())
    trouble = [
        f"{c.name}: {c.status} {c.message} {[h.code for h in c.hints]}"
        for c in result.cases
        if c.status not in ("passed", "skipped") or c.hints
    ]
    assert not trouble, "\n".join(trouble)
    ran = {c.name for c in result.cases if c.status == "passed"}
    # its own ops ran, not skipped: the norms, a loss, clip, the solvers, einsum's diagonal
    assert {"batch_norm_nhwc", "softmax_cross_entropy_soft_labels", "clip_at_bounds"} <= ran
    assert {"cholesky_spd", "triangular_solve_upper", "einsum_repeated_index_trace"} <= ran
