"""`gradcheck fuzz` against the corpus (issue 13): no case file, yet every planted bug it
can reach is found and shrunk, and the correct engines come out clean.

* each planted bug whose corpus case the fuzzer could have generated (its values inside
  the ops' domains: `domain.admissible`), fuzzed over the ops of that case, is found
  within a fixed budget and seed and shrunk to at most 3 ops (4 for a traversal bug)
  and inputs of at most 8 elements; the case file written for it fails through
  `gradcheck run` with the top hint the fuzzer reported. The base engines are clean
  (below), so whatever the fuzzer finds in a planted engine is the planted bug's doing;
  a finding that names an op names the planted bug's op. (Which hint the diagnosis puts
  first on a shrunk case is the diagnosis's business: `test_corpus.py` holds it to each
  bug's own case.)
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
from gradcheck.fuzzing.domain import Unfair, admissible
from gradcheck.fuzzing.generate import DEFAULT_MAX_RANK
from test_corpus import bug_case, engine

BUDGET = 300  # examples
SEED = 1
CLEAN_BUDGET = 500
MAX_OPS, MAX_ELEMENTS = 3, 8
# A window's bug needs a window, and an overlap bug two overlapping ones: the smallest
# cases the shrinker reaches for conv2d's and the 2-D pools' hold a 3x3 kernel or two
# 3x3 windows of a two-channel input.
WINDOWED, MAX_WINDOW_ELEMENTS = ("conv", "max_pool", "avg_pool"), 18


def reachable(bug: Bug) -> bool:
    """Whether the bug's corpus case is one the fuzzer could generate: values in every
    op's domain and moderate (a bug that needs `sigmoid(-900)` is out of its reach)."""
    try:
        admissible(bug_case(bug), kinks=True)
    except Unfair:
        return False
    return True


# One entry per planted bug (the question's bug is in the registry twice, for two cases).
PLANTED = list({bug.engine: bug for bug in reversed(BUGS)}.values())[::-1]
REACHABLE = [bug for bug in PLANTED if reachable(bug)]


def absolute(spec: str) -> str:
    path, _, name = spec.partition(":")
    return f"{ROOT / path}:{name}"


def ops_of(bug: Bug) -> list[str]:
    """The ops of the corpus case that shows the bug: what the fuzzer is pointed at."""
    return sorted({n.op.name for n in bug_case(bug).expression.op_nodes if n.op is not None})


def planted_op(bug: Bug) -> str | None:
    """The op the planted bug is in, where the registry says (`op`, or `fault:<op>.…`)."""
    if bug.op is not None:
        return bug.op
    name = bug.hint.removeprefix("fault:").split(".")[0]
    return name if bug.hint.startswith("fault:") and name in ops_of(bug) else None


def is_the_bug(key: tuple[str, str | None], bug: Bug) -> bool:
    """The finding is named as the registry names the bug (top hint code and op)."""
    code, op = key
    return code == bug.hint and (bug.op is None or op == bug.op)


def test_the_reach_of_the_fuzzer_is_most_of_the_corpus():
    out_of_reach = sorted(bug.id for bug in PLANTED if bug not in REACHABLE)
    assert len(REACHABLE) >= 0.9 * len(PLANTED), out_of_reach


@pytest.mark.parametrize("bug", REACHABLE, ids=lambda b: b.id)
def test_fuzzing_finds_shrinks_and_writes_each_planted_bug(bug, tmp_path):
    run = fuzz_engine(
        engine(bug.engine),
        ops=ops_of(bug),
        max_rank=max(DEFAULT_MAX_RANK, *(v.ndim for v in bug_case(bug).inputs.values())),
        budget=Budget(BUDGET, max_bugs=1),
        seed=SEED,
        out=tmp_path,
        engine_spec=absolute(bug.engine),
    )
    assert run.bugs, f"nothing found in {BUDGET} examples over {ops_of(bug)}"
    (found,) = run.bugs
    code, op = found.key
    # A bug the registry pins to no op (the shared unbroadcast step, a forward bug found by
    # its node) is named at an op the run drew from.
    pinned = planted_op(bug)
    assert op in (None, pinned) or code == "error" or (pinned is None and op in ops_of(bug)), (
        found.key
    )
    case = found.finding.example.case
    # A traversal bug needs a value reached by two paths of different lengths: on the
    # visited-set bug the shrinker stops one op above the smallest such graph, keeping the
    # output's op (`(h * (h * h)) * h` where `h * (h * h)` fails too).
    limit = MAX_OPS + 1 if bug.hint == "backprop-driver" else MAX_OPS
    assert len(case.expression.op_nodes) <= limit, case.expr
    windowed = (planted_op(bug) or "").startswith(WINDOWED)
    most = MAX_WINDOW_ELEMENTS if windowed else MAX_ELEMENTS
    assert all(value.size <= most for value in case.inputs.values()), case.inputs
    assert found.reproduced

    # In this process: the question is what the written file says, not the process
    # boundary (test_isolation.py), and a worker would import TensorFlow again for tfop.
    args = ["run", str(found.path), "--engine", absolute(bug.engine), "--isolate", "none"]
    result = CliRunner().invoke(app, [*args, "--format", "json"], env={"NO_COLOR": "1"})
    assert result.exit_code == 1, result.output
    (checked,) = json.loads(result.stdout)["cases"]
    top, fuzzed = checked["hints"][0], found.result.hints[0]
    assert (checked["status"], top["code"], top.get("op")) == (
        found.result.status,
        fuzzed.code,
        fuzzed.op,
    )
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
    # Kinked ops were checked with whole-number inputs too (exact zeros and ties), not only
    # away from their kinks.
    kinked = [name for name, entry in covered.items() if "at kinks" in entry.features]
    assert len(kinked) >= 4, kinked
