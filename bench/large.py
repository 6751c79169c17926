"""gradcheck on large cases: run time and peak memory against the bare computation.

Two float32 cases, written as YAML with random input specs into a temporary folder:

* ``matmul_chain``: ``matmul(matmul(x, y), z)`` with x, y, z of shape (8, 512, 512);
* ``mlp``: three 1024-wide layers (tanh, relu, logsumexp) on a (512, 1024) batch.

Time. `gradcheck` is what ``gradcheck run`` does: load the file and ``runner.run`` it
with the builtin engine, no reference cache; its inputs are drawn when the case runs.
In this process (``--isolate=none``, the builtin engine's default) the engine runs after
the reference; the isolated column puts the engine in a worker process
(``--isolate=process``, the default for other engines), through a `runner.Checker`
whose worker is started beforehand: there the run overlaps its work, the engine
computing in its worker while the reference is computed here. The baseline is the bare, sequential
computation on the same arrays: the expression's forward and backward in TensorFlow
(ops under a ``tf.GradientTape``), then the builtin engine's forward and backward. All
run in one process after TensorFlow is imported and warmed up; each takes the best of
REPEATS, in turns. Targets: the overlapped run <= 1.0x the bare computation (issue 10;
1.3x before the run overlapped its work), peak memory <= 1.5x.

Both cases have more input elements than the stale-gradients check's limit
(`gradcheck.defaults.STALE_CHECK_LIMIT`), so gradcheck asks the engine for their
gradients once. The "asked twice" column times ``--stale-check-limit 0`` too: the
price of that check, a second backward pass, on cases this large.

Memory. Each (case, side) runs in a fresh subprocess, which reports its peak RSS
(VmHWM, else ``ru_maxrss``: both see TensorFlow's allocations, unlike tracemalloc)
above its RSS just before the work began, after TensorFlow's import and warm-up, the
peak being reset to the RSS there. The bare side draws its inputs with the same
loader, as it needs them too. For the isolated side the worker's peak above its own
RSS before the work is added (an upper bound: the two peaks need not coincide), and
the worker's own start-up RSS is printed beside. Target: gradcheck <= 1.5x.

    python bench/large.py              # both, one table
    python bench/large.py --profile    # also cProfile one gradcheck run of each case
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from baseline import bare_gradients

from gradcheck.util.limits import STALE_CHECK_LIMIT

REPEATS = 10  # the machines here are noisy: more turns, steadier minima
TIME_TARGET, MEMORY_TARGET = 1.0, 1.5
# float32 sums of 512 to 1024 products: TensorFlow (Eigen) and NumPy (BLAS) add in a
# different order, so the per-dtype default (rtol 1.3e-6) is too tight for these sizes.
TOLERANCE = "{rtol: 1.0e-4, atol: 1.0e-3}"

CASES = {
    "matmul_chain": f"""\
  - name: matmul_chain
    description: a batched matmul chain, 8 x 512 x 512 operands
    expr: matmul(matmul(x, y), z)
    dtype: float32
    cotangent: random
    tolerance: {TOLERANCE}
    inputs:
      x: {{shape: [8, 512, 512], init: uniform, low: -1, high: 1}}
      y: {{shape: [8, 512, 512], init: uniform, low: -0.1, high: 0.1}}
      z: {{shape: [8, 512, 512], init: uniform, low: -0.1, high: 0.1}}
""",
    "mlp": f"""\
  - name: mlp
    description: three 1024-wide layers on a batch of 512
    expr: |
      h1 = tanh(x @ w1 + b1)
      h2 = relu(h1 @ w2 + b2)
      logsumexp(h2 @ w3 + b3, axis=1)
    dtype: float32
    cotangent: random
    tolerance: {TOLERANCE}
    inputs:
      x: {{shape: [512, 1024], init: normal}}
      w1: {{shape: [1024, 1024], init: uniform, low: -0.05, high: 0.05}}
      b1: {{shape: [1024], init: normal}}
      w2: {{shape: [1024, 1024], init: uniform, low: -0.05, high: 0.05}}
      b2: {{shape: [1024], init: normal}}
      w3: {{shape: [1024, 1024], init: uniform, low: -0.05, high: 0.05}}
      b3: {{shape: [1024], init: normal}}
""",
}


def write_case(folder: Path, name: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text("cases:\n" + CASES[name])
    return path


# -- the two sides ---------------------------------------------------------------------


THREADS = "auto"  # the run's thread budget (`gradcheck run --threads`); --threads sets it


def warm_up():
    """Import TensorFlow (with the intra-op threads `gradcheck run` gives it when the
    engine runs in a worker, THREADS) and gradcheck's pipeline, and run one tiny case
    through both."""
    from gradcheck.cases.loader import load_case
    from gradcheck.engines.builtin.engine import BuiltinEngine
    from gradcheck.references.tensorflow import limit_threads, load_tensorflow
    from gradcheck.runner import check_case
    from gradcheck.runner.threads import thread_budget

    budget = thread_budget(THREADS)
    if budget is not None:
        limit_threads(budget.reference)
    tf = load_tensorflow()
    case = load_case({"name": "warm", "expr": "sum(tanh(x @ y) + y)", "inputs": WARM_INPUTS})
    check_case(case, BuiltinEngine)
    bare(case, tf)
    return tf


WARM_INPUTS = {"x": {"shape": [4, 4]}, "y": {"shape": [4, 4]}}


def gradcheck_side(path: Path, stale_check_limit: int | None = STALE_CHECK_LIMIT):
    """`gradcheck run PATH` in-process: load, then the runner with the builtin engine."""
    from gradcheck.cases import load_file
    from gradcheck.engines.builtin.engine import BuiltinEngine
    from gradcheck.runner import RunOptions, run

    return run(load_file(path), BuiltinEngine, RunOptions(stale_check_limit=stale_check_limit))


def isolated_checker():
    """A `Checker` with the builtin engine in a worker, started and warmed up."""
    from gradcheck.cases.loader import load_case
    from gradcheck.runner import Checker, RunOptions

    checker = Checker("builtin", RunOptions(isolate="process", threads=THREADS))
    checker.check(
        load_case({"name": "warm", "expr": "sum(tanh(x @ y) + y)", "inputs": WARM_INPUTS})
    )
    return checker


def isolated_side(path: Path, checker) -> list:
    """The same as `gradcheck_side`, the engine in `checker`'s worker."""
    from gradcheck.cases import load_file

    return [checker.check(case) for case in load_file(path)]


def bare(case, tf) -> None:
    """Forward and backward in TensorFlow, then in the builtin engine: nothing else."""
    bare_gradients(case, tf)


def draw(case) -> None:
    """Draw the case's random inputs and cotangent, as gradcheck does when the case runs."""
    case.release()
    case.inputs, case.cotangent  # noqa: B018


def best_of_each(*calls) -> list[float]:
    """The best time of each `(fn, *args)` over REPEATS rounds, taking turns: the minimum
    is the measure least disturbed by whatever else the machine is doing."""
    best = [float("inf")] * len(calls)
    for _ in range(REPEATS):
        for i, (fn, *args) in enumerate(calls):
            started = time.perf_counter()
            fn(*args)
            best[i] = min(best[i], time.perf_counter() - started)
    return best


# -- memory, one subprocess per (case, side) -------------------------------------------


def status_mb(key: str, pid: int | str = "self") -> float | None:
    """A field of /proc/<pid>/status (Linux) in MB, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def rss_mb(pid: int | str = "self") -> float:
    return status_mb("VmRSS", pid) or 0.0


def peak_mb(pid: int | str = "self") -> float:
    """The peak RSS: VmHWM where there is one, as `ru_maxrss` also counts the RSS of the
    parent this process was forked from (Linux carries it over `exec`)."""
    hwm = status_mb("VmHWM", pid)
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak(pid: int | str = "self") -> bool:
    """Lower the peak RSS to the current RSS (Linux >= 4.0), so that the import's peak,
    often above what the work needs, does not hide the work's."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(side: str, path: Path) -> None:
    """In a fresh process: the peak RSS the work adds, as JSON on stdout."""
    from gradcheck.cases import load_file

    tf = warm_up()
    checker = isolated_checker() if side == "isolated" else None
    worker = checker.engines.pool.worker.process.pid if checker else None
    reset = reset_peak() and (worker is None or reset_peak(worker))
    before, worker_before = rss_mb(), rss_mb(worker) if worker else 0.0
    if side == "gradcheck":
        statuses = [c.status for c in gradcheck_side(path).cases]
    elif side == "isolated":
        statuses = [c.status for c in isolated_side(path, checker)]
    else:
        cases = load_file(path)
        for case in cases:
            bare(case, tf)
        statuses = ["n/a"]
    peak = peak_mb()
    if worker:
        peak += peak_mb(worker) - worker_before
        checker.close()
    print(json.dumps({
        "before": before, "peak": peak, "reset": reset, "statuses": statuses,
        "worker_start": worker_before,
    }))  # fmt: skip


def memory(side: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--measure", side, str(path), "--threads", THREADS],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


# -- main ------------------------------------------------------------------------------


def main() -> None:
    global THREADS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="store_true", help="cProfile a gradcheck run")
    parser.add_argument("--measure", nargs=2, metavar=("SIDE", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--threads", default=THREADS, help="the thread budget, as gradcheck run --threads"
    )
    args = parser.parse_args()
    THREADS = args.threads
    if args.measure:
        measure(args.measure[0], Path(args.measure[1]))
        return

    from gradcheck.cases import load_file

    tf = warm_up()
    checker = isolated_checker()
    here = tf.config.threading.get_intra_op_parallelism_threads() or "its default"
    print(f"--threads {THREADS}: {checker.threads}; TensorFlow's intra-op threads: {here}")
    sides = ("bare", "gradcheck", "isolated")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {name: write_case(Path(tmp), name) for name in CASES}
        rows, totals, draws = [], [0.0] * 4, {}
        for name, path in paths.items():
            for result in (gradcheck_side(path).cases[0], isolated_side(path, checker)[0]):
                assert result.status == "passed", f"{name}: {result.status} {result.message}"
            case = load_file(path)[0]
            times = best_of_each(
                (bare, case, tf),
                (gradcheck_side, path),
                (isolated_side, path, checker),
                (gradcheck_side, path, None),
            )
            draws[name] = best_of_each((draw, case))[0]
            totals = [total + t for total, t in zip(totals, times, strict=True)]
            mem = {side: memory(side, path) for side in sides}
            rows.append((name, *times, mem))
            if args.profile:
                profile(path)
    checker.close()

    def added(mem: dict, side: str) -> float:
        return mem[side]["peak"] - mem[side]["before"]

    print(f"time: best of {REPEATS}; memory: peak RSS above the RSS before the work")
    print(f"{'case':<14}{'bare':>8}{'in-process':>12}{'isolated':>16}{'asked twice':>13}   "
          f"{'bare MB':>8}{'in-process MB':>15}{'isolated MB':>16}")  # fmt: skip
    for name, base, tool, iso, twice, mem in rows:
        b, g, i = (added(mem, side) for side in sides)
        print(
            f"{name:<14}{base:>7.2f}s{tool:>6.2f}s {tool / base:>4.2f}x{iso:>9.2f}s "
            f"{iso / base:>4.2f}x{twice / base:>12.2f}x   {b:>8.0f}{g:>9.0f} {g / b:>4.2f}x"
            f"{i:>10.0f} {i / b:>4.2f}x"
        )
    base, tool, iso, twice = totals
    print(
        f"{'total':<14}{base:>7.2f}s{tool:>6.2f}s {tool / base:>4.2f}x{iso:>9.2f}s "
        f"{iso / base:>4.2f}x{twice / base:>12.2f}x"
    )
    print(
        f"targets: time <= {TIME_TARGET}x (the overlapped run: isolated), "
        f"memory <= {MEMORY_TARGET}x"
    )
    print("the bare computation has its inputs drawn already; gradcheck draws them per run:")
    for name, base, tool, iso, *_ in rows:
        with_draw = base + draws[name]
        print(
            f"  {name}: drawing takes {draws[name]:.2f}s; against bare + drawing, in-process "
            f"{tool / with_draw:.2f}x, isolated {iso / with_draw:.2f}x"
        )
    if not all(m[side]["reset"] for *_, m in rows for side in m):
        print("  (could not reset the peak RSS: the memory numbers include the import's peak)")
    for name, *_, mem in rows:
        print(
            f"  {name}: absolute peak RSS bare {mem['bare']['peak']:.0f} MB, "
            f"in-process {mem['gradcheck']['peak']:.0f} MB, isolated {mem['isolated']['peak']:.0f}"
            f" MB (its worker started at {mem['isolated']['worker_start']:.0f} MB)"
        )


def profile(path: Path) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(gradcheck_side, path)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(25)
    print(f"-- cProfile of one gradcheck run of {path.name}, by cumulative time")
    print("\n".join(out.getvalue().splitlines()[:60]))


if __name__ == "__main__":
    main()
