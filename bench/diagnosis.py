"""What diagnosing a failure costs, measured against checking the same case.

1. The question's case with the question's engine: the time diagnosis adds, after
   TensorFlow is imported (target: under 50 ms), mechanism probes included.
2. A small MLP (inputs about 256x256) with a planted bug: a failing check with
   diagnosis vs the same check with `--no-diagnose` (target: at most 10x).
3. A driver bug (the corpus's recursive backward, per path) on a 128x128 graph that
   reuses a value: the driver localisation's cost beside the check.
4. Formula recovery (SPEC §6.1 `formula`) at a failing tanh node whose VJP forgot its
   square and at a failing conv2d node whose input gradient is off by a factor (1 + x),
   beyond any small expression: its seconds (target: under 0.5 s each) and the ratio to
   localising that node (checking every node of the case alone).
5. The whole shipped suite with one planted bug (the seed's unbroadcast): the run with
   diagnosis (`--diagnose=first`, the default) vs `--no-diagnose` (target: at most 2x),
   and `--diagnose=all` beside it. References come from a warm cache, as in a CLI run
   after the first, so the ratio is of gradcheck's own work.
5. The same suite with one planted conv bug instead (`conv2d.kernel-not-flipped`):
   `--diagnose=first` vs `--no-diagnose` (target: at most 2x).

    python bench/diagnosis.py

NumPy's BLAS runs on one thread here (unless OPENBLAS_NUM_THREADS is set): on a 2-core
machine that other jobs load, OpenBLAS's spinning threads make the diagnosis's many
small matmuls 3-6x slower from one run to the next, and the ratio measures that, not
gradcheck. `OPENBLAS_NUM_THREADS=0 python bench/diagnosis.py` measures with BLAS's own
default.
"""

from __future__ import annotations

import os

if os.environ.setdefault("OPENBLAS_NUM_THREADS", "1") == "0":  # before NumPy is imported
    del os.environ["OPENBLAS_NUM_THREADS"]

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gradcheck.cases import Case, load_file, load_paths
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.diagnosis.localisation.localise import check_nodes
from gradcheck.diagnosis.mechanisms.formula import Recovery
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.loading import load_engine
from gradcheck.references.cache import ReferenceCache
from gradcheck.references.tensorflow import load_tensorflow
from gradcheck.runner import RunOptions, check_case, run

REPEATS = 10
MLP_CASE = """
cases:
  - name: mlp_planted_bug
    dtype: float32
    cotangent: random
    expr: |
      h = sigmoid(x @ w1 + b1)
      log_softmax(h @ w2 + b2, axis=1)
    inputs:
      x: {shape: [256, 256], init: normal}
      w1: {shape: [256, 256], init: normal}
      b1: {shape: [256], init: normal}
      w2: {shape: [256, 64], init: normal}
      b2: {shape: [64], init: normal}
    tolerance: {rtol: 1e-4, atol: 1e-4}
"""


DRIVER_CASE = """
cases:
  - name: reused_hidden_layer
    cotangent: random
    expr: |
      h = tanh(x @ w)
      (h * sigmoid(h)) @ v
    inputs:
      x: {shape: [128, 128], init: normal}
      w: {shape: [128, 128], init: uniform, low: -0.1, high: 0.1}
      v: {shape: [128, 16], init: normal}
"""
SUITE_TURNS = 5
RECOVERY_CASES = """
cases:
  - name: tanh_layer
    cotangent: random
    expr: tanh(x @ w)
    inputs:
      x: {shape: [32, 32], init: normal}
      w: {shape: [32, 32], init: uniform, low: -0.2, high: 0.2}
  - name: conv_layer
    cotangent: random
    expr: conv2d(x, w, padding="SAME")
    inputs:
      x: {shape: [2, 8, 8, 3], init: normal}
      w: {shape: [3, 3, 3, 4], init: normal}
"""


class WrongRules(BuiltinEngine):
    """tanh's VJP without its square; conv2d's input gradient times (1 + x)."""

    name = "builtin+wrong-rules"

    def vjp_rule(self, op, i):
        right = super().vjp_rule(op, i)
        if op.name == "tanh":
            return lambda g, ans, x: g * (1 - ans)
        if op.name == "conv2d" and i == 0:
            return lambda g, ans, x, w, **attrs: right(g, ans, x, w, **attrs) * (1 + x)
        return right


def recovery(case: Case) -> None:
    """Best of REPEATS: localising the case's nodes, and recovering the failing one's rule."""
    localised = recovered = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        checks = check_nodes(case, WrongRules)
        localised = min(localised, time.perf_counter() - start)
        [check] = [c for c in checks if c.result.status == "failed"]
        start = time.perf_counter()
        found = Recovery(check).recover(check.result.args[0])
        recovered = min(recovered, time.perf_counter() - start)
    said = f"`{found.got_rule}`" if found else "nothing (gives up)"
    print(
        f"formula recovery at {check.node.text}: "
        f"{recovered:.3f}s (target < 0.5 s), {recovered / localised:.1f}x localising the "
        f"case's nodes ({localised * 1e3:.1f} ms); recovered {said}"
    )


def leading_only() -> FaultyEngine:
    return FaultyEngine(FAULTS["broadcast.leading-only"])


def timed(case: Case, factory, options: RunOptions) -> tuple[float, object]:
    start = time.perf_counter()
    result = check_case(case, factory, options)
    return time.perf_counter() - start, result


def compare(label: str, case: Case, factory) -> float:
    """Best of REPEATS for each, the two runs taken in turn: on a busy machine a burst of
    load then slows both alike instead of one of them."""
    checked = diagnosed = float("inf")
    for _ in range(REPEATS):
        seconds, plain = timed(case, factory, RunOptions(diagnose=False))
        checked = min(checked, seconds)
        seconds, result = timed(case, factory, RunOptions())
        diagnosed = min(diagnosed, seconds)
    assert plain.status == "failed" and result.hints, "the bench needs a failing case"
    print(
        f"{label}: check {checked * 1e3:.1f} ms, with diagnosis {diagnosed * 1e3:.1f} ms "
        f"(+{(diagnosed - checked) * 1e3:.1f} ms, {diagnosed / checked:.1f}x); "
        f"top hint {result.hints[0].code}"
        + (f" [{result.hints[0].mechanism}]" if result.hints[0].mechanism else "")
    )
    return diagnosed / checked


def one_case(text: str, name: str) -> Case:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, name)
        path.write_text(text)
        return next(c for c in load_file(path) if isinstance(c, Case))


def load_recovery_cases() -> list[Case]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "recovery.yaml")
        path.write_text(RECOVERY_CASES)
        return [c for c in load_file(path) if isinstance(c, Case)]


SUITE_MODES: dict[str, bool | str] = {
    "--no-diagnose": False,
    "--diagnose=first": "first",
    "--diagnose=all": "all",
}


def whole_suite(
    factory: Callable[[], FaultyEngine] = leading_only,
    bug: str = "broadcast.leading-only",
    modes: dict[str, bool | str] = SUITE_MODES,
) -> float:
    """The shipped suite, one planted bug: each mode's best of SUITE_TURNS, taken in turn."""
    with tempfile.TemporaryDirectory() as tmp:
        cache = ReferenceCache(Path(tmp))
        cases = load_paths([Path("cases")])
        run(cases, factory, RunOptions(diagnose=False, cache=cache))  # warm the cache
        best = dict.fromkeys(modes, float("inf"))
        for _ in range(SUITE_TURNS):
            for label, mode in modes.items():
                start = time.perf_counter()
                result = run(cases, factory, RunOptions(diagnose=mode, cache=cache))
                best[label] = min(best[label], time.perf_counter() - start)
    plain = best["--no-diagnose"]
    failing = result.count("failed") + result.count("error")
    print(
        f"shipped suite ({len(cases)} cases, {failing} failing), {bug}: "
        + ", ".join(f"{label} {seconds:.2f}s" for label, seconds in best.items())
        + f"; {len(result.root_causes)} root cause(s)"
    )
    for label, mode in modes.items():
        if mode:  # each diagnosing mode against --no-diagnose
            print(f"  {label} / --no-diagnose: {best[label] / plain:.2f}x")
    return best["--diagnose=first"] / plain


def conv_bug_suite() -> float:
    """The shipped suite with one planted conv bug (issue 25): conv2d's input gradient
    with its kernel not flipped fails every case that uses conv2d; `--diagnose=first`
    diagnoses the first in full and the others by the fault it found."""
    fault = FAULTS["conv2d.kernel-not-flipped"]
    first = {label: SUITE_MODES[label] for label in ("--no-diagnose", "--diagnose=first")}
    return whole_suite(lambda: FaultyEngine(fault), fault.name, first)


def main() -> None:
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    load_tensorflow()
    seed = next(c for c in load_file("cases/seed.yaml") if isinstance(c, Case))
    compare("seed case, seed engine", seed, load_engine("examples/seed_engine.py"))
    mlp = one_case(MLP_CASE, "mlp.yaml")
    ratio = compare(
        "MLP 256x256, sigmoid.from-input", mlp, lambda: FaultyEngine(FAULTS["sigmoid.from-input"])
    )
    print(f"diagnosis / check on the MLP: {ratio:.1f}x (target <= 10x)")
    driver = one_case(DRIVER_CASE, "driver.yaml")
    compare(
        "driver bug 128x128, recursive backward (per path)",
        driver,
        load_engine("tests/corpus/tape_bugs.py:RecursiveBackward"),
    )
    for case in load_recovery_cases():
        recovery(case)
    suite = whole_suite()
    print(f"run with diagnosis / without on the shipped suite: {suite:.2f}x (target <= 2x)")
    conv = conv_bug_suite()
    print(f"the same with a planted conv bug: {conv:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
