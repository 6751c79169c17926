"""How much gradcheck's pipeline costs over a hand-written check of the same cases.

The baseline is what one would write without gradcheck: draw each case's inputs, build
the expression from `tf` ops under a `tf.GradientTape`, differentiate it with the builtin
engine too, and `np.testing.assert_allclose` the two. gradcheck checks the same cases
two ways: in this process (``--isolate=none``, the builtin engine's default) and with
the engine in a worker process (``--isolate=process``, the default for other engines),
through a `runner.Checker` whose worker is started beforehand: the worker's one-off
start-up is printed beside, as in a real run it overlaps TensorFlow's import. Each case
takes the best of several turns on each side, the sides taking turns case by case (a
burst of other work on the machine then spoils one turn, not a whole pass), in this
process after TensorFlow is imported and warmed up; the totals add the cases' bests.
Targets: gradcheck within 1.3x of the loop (issue 2); isolation within 1.15x of
in-process (issue 10).

    python bench/run_overhead.py [cases/]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from baseline import bare_gradients

from gradcheck.cases import Case, discover, load_file
from gradcheck.cases.dtypes import LOW_PRECISION
from gradcheck.references.tensorflow import load_tensorflow
from gradcheck.runner import Checker, RunOptions

REPEATS = 7


def hand_written(case: Case, tf) -> None:
    """The check as a user would write it: inputs, gradients by hand, assert_allclose."""
    case.release()  # the inputs are drawn here, as gradcheck draws them per case
    want, got = bare_gradients(case, tf)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=case.tolerance.rtol, atol=case.tolerance.atol)
    case.release()


def checked(case: Case, checker: Checker) -> None:
    assert checker.check(case).status == "passed", case.name


def _more_than_rev(case: Case) -> bool:
    return "fwd" in (case.modes or ()) or (case.order or 1) > 1


def main(paths: list[str]) -> None:
    tf = load_tensorflow()
    loaded = [c for p in discover(paths or ["cases"]) for c in load_file(p) if isinstance(c, Case)]
    # assert_allclose cannot judge float16/bfloat16 gradients (gradcheck measures their
    # distance from the float64 answer), and the loop checks reverse mode only, so it
    # has no fair counterpart for those or for the cases that also check forward mode
    # or second order (bench/modes.py measures these).
    cases = [c for c in loaded if c.dtype not in LOW_PRECISION and not _more_than_rev(c)]
    started = time.perf_counter()
    isolated = Checker("builtin", RunOptions(isolate="process"))
    checked(cases[0], isolated)
    start_up = time.perf_counter() - started
    in_process = Checker("builtin", RunOptions(isolate="none"))
    sides = {
        "hand-written loop": lambda case: hand_written(case, tf),
        "gradcheck, in-process": lambda case: checked(case, in_process),
        "gradcheck, isolated": lambda case: checked(case, isolated),
    }
    for case in cases[:3]:  # warm-up: TensorFlow's first calls trace and allocate
        for side in sides.values():
            side(case)
    best = dict.fromkeys(sides, 0.0)
    for case in cases:
        turns = dict.fromkeys(sides, float("inf"))
        for _ in range(REPEATS):
            for name, side in sides.items():
                begun = time.perf_counter()
                side(case)
                turns[name] = min(turns[name], time.perf_counter() - begun)
        for name in sides:
            best[name] += turns[name]
    isolated.close()
    base, inner, outer = best.values()
    left_out = len(loaded) - len(cases)
    print(
        f"{len(cases)} cases ({left_out} float16/bfloat16, forward-mode or second-order "
        f"left out), best of {REPEATS} turns"
    )
    for name, seconds in best.items():
        print(f"{name + ':':<24}{seconds * 1e3:8.1f} ms  {seconds / base:5.2f}x the loop")
    print(f"{'worker start-up:':<24}{start_up * 1e3:8.1f} ms  (once per run)")
    print(
        f"in-process {inner / base:.2f}x the loop (target <= 1.3x); "
        f"isolated {outer / inner:.2f}x in-process (target <= 1.15x)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
