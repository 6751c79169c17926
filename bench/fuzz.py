"""What fuzzing costs, and how soon it hands back each planted bug.

1. Examples per second against the builtin engine (every op, no bug: the whole budget
   is spent generating and checking), beside the bare check of the same examples (the
   builtin engine run as the fuzzer runs it, from the loaded cases): the ratio is what
   generating with Hypothesis, the domain check and the bookkeeping cost.
2. For each planted bug of the test corpus within the fuzzer's reach, fuzzed over the
   ops of the corpus case that shows it: the seconds until it is found and shrunk
   (target: median under 10 s, with TensorFlow imported before the clock starts).

    python bench/fuzz.py
"""

from __future__ import annotations

import contextlib
import random
import statistics
import sys
import time
from pathlib import Path

from hypothesis import find, settings
from hypothesis.errors import NoSuchExample

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from corpus import ROOT as CORPUS_ROOT  # noqa: E402
from gradcheck.engines.builtin.engine import BuiltinEngine  # noqa: E402
from gradcheck.engines.loading import load_engine  # noqa: E402
from gradcheck.engines.reverse import run_engine  # noqa: E402
from gradcheck.fuzzing import Budget, fuzz_engine  # noqa: E402
from gradcheck.fuzzing.generate import Space, examples  # noqa: E402
from gradcheck.fuzzing.output import plural  # noqa: E402
from gradcheck.fuzzing.search import describe  # noqa: E402
from gradcheck.references.tensorflow import load_tensorflow  # noqa: E402

EXAMPLES = 1000
SEED = 0
BUG_BUDGET = 300  # as the tests
TARGET_S = 10.0


def throughput() -> None:
    start = time.perf_counter()
    run = fuzz_engine(BuiltinEngine, budget=Budget(EXAMPLES), seed=SEED)
    fuzzing = time.perf_counter() - start
    assert not run.bugs and run.search.examples == EXAMPLES

    cases = generated(Space(run.ops), EXAMPLES)
    start = time.perf_counter()
    for case in cases:  # as the fuzzer checks: the engine asked twice, the reference once
        run_engine(BuiltinEngine(), case.expression, case.inputs, case.wrt, case.cotangent,
                   ask_twice=True)  # fmt: skip
        run_engine(BuiltinEngine(), case.expression, case.inputs, case.wrt, case.cotangent)
    bare = (time.perf_counter() - start) * EXAMPLES / len(cases)
    print(
        f"builtin engine, every op: {EXAMPLES} examples in {fuzzing:.2f}s, "
        f"{EXAMPLES / fuzzing:.0f} examples/s; the bare check of as many {bare:.2f}s "
        f"({fuzzing / bare:.1f}x); {run.search.rejected} drawn outside a domain"
    )


def generated(space: Space, count: int) -> list:
    """`count` cases from the fuzzer's own strategy, as loaded cases."""
    cases = []

    def keep(example) -> bool:
        cases.append(example.case)
        return False

    with contextlib.suppress(NoSuchExample):  # `keep` never holds: every example is drawn
        find(examples(space), keep, settings=settings(max_examples=count, database=None),
             random=random.Random(SEED))  # fmt: skip
    return cases


def planted_bugs() -> None:
    from test_fuzz_corpus import REACHABLE, is_the_bug, ops_of

    load_tensorflow()  # its import is a one-off, excluded
    times, named = [], 0
    for bug in REACHABLE:
        path, _, name = bug.engine.partition(":")
        factory = load_engine(f"{CORPUS_ROOT / path}:{name}")
        start = time.perf_counter()
        budget = Budget(BUG_BUDGET, max_bugs=1)
        run = fuzz_engine(factory, ops=ops_of(bug), budget=budget, seed=SEED)
        if not run.bugs:
            spent = time.perf_counter() - start
            print(f"  {bug.id:32s} NOT FOUND in {BUG_BUDGET} examples ({spent:.1f}s)")
            times.append(float("inf"))
            continue
        found = run.bugs[0]
        finding = found.finding
        seconds = finding.after_s + finding.shrink_s
        times.append(seconds)
        named += is_the_bug(found.key, bug)
        case = finding.example.case
        after = plural(finding.after_examples, "example")
        print(
            f"  {bug.id:32s} {seconds:5.2f}s  (found after {after}, "
            f"shrunk in {finding.shrink_steps} steps) {describe(found.key)}: "
            f"{' ; '.join(case.expr.splitlines())}"
        )
    median = statistics.median(times)
    verdict = "met" if median < TARGET_S else "MISSED"
    missed = sum(t == float("inf") for t in times)
    print(
        f"{len(REACHABLE)} planted bugs: median {median:.2f}s to find and shrink (target < "
        f"{TARGET_S:.0f}s: {verdict}), worst {max(times):.2f}s, {missed} not found; "
        f"{named} named first as the corpus names them on their own cases"
    )


if __name__ == "__main__":
    throughput()
    planted_bugs()
