"""`gradcheck fuzz` against the corpus (issue 13): no case file, yet every planted bug is
found and shrunk, and the correct engines come out clean.

* each planted bug, fuzzed over the ops of the corpus case that shows it, is found within
  a fixed budget and seed, under the hint the corpus registry says it is (for catalogue
  faults, its `fault:` code), shrunk to at most 3 ops and inputs of at most 8 elements;
  the case file written for it fails through `gradcheck run` with the top hint the
  fuzzer reported;
* each correct engine, fuzzed over every op it has for 500 examples, has no finding:
  no false alarm, and that over examples at exact kinks and ties too.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from corpus import BUGS, CORRECT_ENGINES, ROOT, Bug
from gradcheck.cli import app
from gradcheck.fuzzing import Budget, fuzz_engine
from test_corpus import bug_case, engine

BUDGET = 300  # examples
SEED = 0
CLEAN_BUDGET = 500
MAX_OPS, MAX_ELEMENTS = 3, 8

# One entry per planted bug (the question's bug is in the registry twice, for two cases).
PLANTED = list({bug.engine: bug for bug in reversed(BUGS)}.values())[::-1]


def absolute(spec: str) -> str:
    path, _, name = spec.partition(":")
    return f"{ROOT / path}:{name}"


def ops_of(bug: Bug) -> list[str]:
    """The ops of the corpus case that shows the bug: what the fuzzer is pointed at."""
    return sorted({n.op.name for n in bug_case(bug).expression.op_nodes if n.op is not None})


def is_the_bug(key: tuple[str, str | None], bug: Bug) -> bool:
    code, op = key
    return code == bug.hint and (bug.op is None or op == bug.op)


@pytest.mark.parametrize("bug", PLANTED, ids=lambda b: b.id)
def test_fuzzing_finds_shrinks_and_writes_each_planted_bug(bug, tmp_path):
    run = fuzz_engine(
        engine(bug.engine),
        ops=ops_of(bug),
        budget=Budget(BUDGET, max_bugs=2),
        seed=SEED,
        out=tmp_path,
        engine_spec=absolute(bug.engine),
    )
    found = [b for b in run.bugs if is_the_bug(b.key, bug)]
    assert found, f"{bug.hint} not found; found {[b.key for b in run.bugs]}"
    (found_bug,) = found
    case = found_bug.finding.example.case
    assert len(case.expression.op_nodes) <= MAX_OPS, case.expr
    assert all(value.size <= MAX_ELEMENTS for value in case.inputs.values()), case.inputs
    assert found_bug.reproduced

    result = CliRunner().invoke(
        app,
        ["run", str(found_bug.path), "--engine", absolute(bug.engine), "--format", "json"],
        env={"NO_COLOR": "1"},
    )
    assert result.exit_code == 1, result.output
    (checked,) = json.loads(result.stdout)["cases"]
    top = checked["hints"][0]
    assert (top["code"], top.get("op")) == found_bug.key
    assert checked["expr"] == case.expr


@pytest.mark.parametrize("spec", CORRECT_ENGINES, ids=lambda s: s.split("/")[-1].split(".")[0])
def test_correct_engines_have_no_finding(spec):
    run = fuzz_engine(engine(spec), budget=Budget(CLEAN_BUDGET), seed=SEED)
    search = run.search
    assert not run.bugs, "\n".join(bug.text for bug in run.bugs)
    assert search.examples == CLEAN_BUDGET and search.stopped == "max-examples"
    assert search.unconfirmed == search.rounding == 0
    covered = search.coverage.ops
    assert set(covered) == set(run.ops), "every op the engine has was generated"
    # Kinked ops were checked with integer inputs too (exact zeros and ties), not only
    # away from their kinks.
    kinked = [name for name, entry in covered.items() if "integer inputs" in entry.features]
    assert len(kinked) >= 4, kinked
