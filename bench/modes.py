"""What forward mode and second order cost, against reverse mode, on the shipped suite.

Every shipped case (cases/) is checked, with the builtin engine against TensorFlow and
no reference cache, four ways: reverse mode alone (the baseline), forward mode alone
(`modes: [fwd]`), reverse mode at second order (`order: 2`), and everything at once
(`modes: [rev, fwd]`, `order: 2`, which adds the two modes' consistency check). Target:
forward mode, and second order's part (the order-2 run less the baseline), each at most
3x the baseline.

    python bench/modes.py

Each way is timed over the whole suite, best of `REPEATS`, the four taken in turn so that
a burst of load on a busy machine slows them alike; TensorFlow is imported before.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy: see bench/diagnosis.py

import time
from dataclasses import replace
from pathlib import Path

from gradcheck.cases import Case, load_paths
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.references.tensorflow import load_tensorflow
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 5
WAYS = {
    "reverse mode": (("rev",), 1),
    "forward mode": (("fwd",), 1),
    "reverse, order 2": (("rev",), 2),
    "both modes, order 2": (("rev", "fwd"), 2),
}


def suite(modes: tuple[str, ...], order: int) -> list[Case]:
    cases = [c for c in load_paths([ROOT / "cases"]) if isinstance(c, Case)]
    return [replace(c, modes=modes, order=order) for c in cases]


def main() -> None:
    load_tensorflow()
    suites = {way: suite(*setting) for way, setting in WAYS.items()}
    best = dict.fromkeys(WAYS, float("inf"))
    for _ in range(REPEATS):
        for way, cases in suites.items():
            started = time.perf_counter()
            result = run(cases, BuiltinEngine, RunOptions())
            best[way] = min(best[way], time.perf_counter() - started)
            bad = [(c.name, c.status) for c in result.cases if not c.passed]
            assert not bad, (way, bad)
    base = best["reverse mode"]
    print(f"{len(suites['reverse mode'])} shipped cases, builtin engine vs TensorFlow, no cache")
    for way, seconds in best.items():
        print(f"  {way:<20} {seconds:6.2f} s  {seconds / base:4.2f}x reverse mode")
    second = best["reverse, order 2"] - base
    print(f"  second order's part  {second:6.2f} s  {second / base:4.2f}x reverse mode (target 3x)")
    print(f"  forward mode         {best['forward mode'] / base:13.2f}x reverse mode (target 3x)")


if __name__ == "__main__":
    main()
