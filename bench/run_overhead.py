"""How much gradcheck's pipeline costs over a hand-written check of the same cases.

The baseline is what one would write without gradcheck: build each expression from
`tf` ops under a `tf.GradientTape`, differentiate it with the builtin engine too,
and `np.testing.assert_allclose` the two. gradcheck runs the same cases through its
runner (driver, ask-twice stale check, comparison, report objects). Both run in this
process after TensorFlow is imported and warmed up; each case takes the best of
several repeats. Target (issue 2): gradcheck within 1.3x of the loop.

    python bench/run_overhead.py [cases/]
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
from baseline import bare_gradients

from gradcheck.cases import Case, discover, load_file
from gradcheck.engines.builtin import BuiltinEngine
from gradcheck.engines.tensorflow import load_tensorflow
from gradcheck.runner import RunOptions, check_case

REPEATS = 5


def hand_written(case: Case, tf) -> None:
    """The check as a user would write it: gradients by hand, then assert_allclose."""
    want, got = bare_gradients(case, tf)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=case.tolerance.rtol, atol=case.tolerance.atol)


def best_of(fn, *args) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def main(paths: list[str]) -> None:
    tf = load_tensorflow()
    cases = [c for p in discover(paths or ["cases"]) for c in load_file(p) if isinstance(c, Case)]
    options = RunOptions()
    for case in cases[:3]:  # warm-up: TensorFlow's first calls trace and allocate
        hand_written(case, tf)
        check_case(case, BuiltinEngine, options)
    ratios, base_total, tool_total = [], 0.0, 0.0
    for case in cases:
        base = best_of(hand_written, case, tf)
        tool = best_of(check_case, case, BuiltinEngine, options)
        ratios.append(tool / base)
        base_total += base
        tool_total += tool
    print(f"{len(cases)} cases, best of {REPEATS} each")
    print(f"hand-written loop: {base_total * 1e3:8.1f} ms")
    print(f"gradcheck:         {tool_total * 1e3:8.1f} ms")
    print(
        f"total ratio {tool_total / base_total:.2f}x; per case median "
        f"{statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x (target <= 1.3x)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
