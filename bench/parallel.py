"""How much `pytest --gradcheck DIR -n 2` (pytest-xdist) gains over a serial run.

Generates a suite of small random cases (elementwise, broadcasting, matmul, reductions,
softmax, shape ops; float64 and float32; 10 files of 30 cases) in a temporary folder,
then times, each in a fresh process:

* ``pytest --gradcheck DIR``           (serial)
* ``pytest --gradcheck DIR -n 2``      (two workers)
* ``gradcheck run DIR --no-cache``     (for comparison: the CLI, one process)

Every run pays TensorFlow's import once per process (the controller of an xdist run
imports nothing heavy; each worker does); pytest's own cache and any gradcheck
reference cache are off, so each run computes every reference. Each command takes
the best of REPEATS.

    python bench/parallel.py [--cases 300] [--workers 2] [--repeats 2] [--scale 1]

Each xdist worker imports TensorFlow (seconds) and collects every case before running
its share, so small suites gain little or lose; `--scale` makes cases heavier, to see
where the workers pay for themselves.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES_PER_FILE = 30
# (expression, {input: shape}) templates; {n}, {m}, {k} are drawn per case.
TEMPLATES = [
    ("tanh(x) * y + exp(-x)", {"x": "n,m", "y": "n,m"}),
    ("sigmoid(x) / (1 + square(y))", {"x": "n,m", "y": "n,m"}),
    ("sum(relu(x) * x + sin(y), axis=1)", {"x": "n,m", "y": "n,m"}),
    ("x + b", {"x": "n,m", "b": "m"}),
    ("mean(x * b, axis=0)", {"x": "n,m", "b": "1,m"}),
    ("x @ w", {"x": "n,k", "w": "k,m"}),
    ("tanh(x @ w + b)", {"x": "n,k", "w": "k,m", "b": "m"}),
    ("matmul(a, c)", {"a": "2,n,k", "c": "k,m"}),
    ("logsumexp(x, axis=1)", {"x": "n,m"}),
    ("max(x, axis=0)", {"x": "n,m"}),
    ("softmax(x, axis=-1)", {"x": "n,m"}),
    ("log_softmax(x @ w)", {"x": "n,k", "w": "k,m"}),
    ("reshape(transpose(x), [-1])", {"x": "n,m"}),
    ("concat([x, y], axis=0)", {"x": "n,m", "y": "k,m"}),
    ("sum(x[1:, ::2] * 2.0)", {"x": "n,m"}),
]


def write_suite(folder: Path, count: int, scale: int = 1, seed: int = 0) -> None:
    rng = random.Random(seed)
    files: dict[int, list[str]] = {}
    for i in range(count):
        expr, inputs = TEMPLATES[i % len(TEMPLATES)]
        sizes = {d: scale * rng.randint(2, 6) for d in "nmk"}
        specs = ", ".join(
            f"{name}: {{shape: [{', '.join(str(sizes.get(d, d)) for d in shape.split(','))}]}}"
            for name, shape in inputs.items()
        )
        # One case in three float32, whose sums of up to 6 * scale products round
        # differently in TensorFlow and NumPy: a tolerance for that, not the default.
        float32 = "    dtype: float32\n    tolerance: {rtol: 1.0e-3, atol: 1.0e-2}\n"
        files.setdefault(i // CASES_PER_FILE, []).append(
            f'  - name: case_{i:03d}\n    expr: "{expr}"\n'
            + (float32 if i % 3 == 2 else "")
            + f"    cotangent: random\n    inputs: {{{specs}}}\n"
        )
    for index, cases in files.items():
        (folder / f"suite_{index:02d}.yaml").write_text("cases:\n" + "".join(cases))


def timed(command: list[str], cwd: Path, repeats: int) -> tuple[float, str]:
    """The best wall time of `command` over `repeats` runs, and its last output line."""
    env = {**os.environ, "NO_COLOR": "1"}
    best, last = float("inf"), ""
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        best = min(best, time.perf_counter() - started)
        lines = done.stdout.strip().splitlines() or ["(no output)"]
        last = lines[-1]
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return best, last


SPIN = "import time; t = time.perf_counter(); sum(range(3 * 10**7)); print(time.perf_counter() - t)"


def effective_cpus(workers: int) -> float:
    """How many CPU-bound processes this machine really runs at once (up to `workers`):
    `workers` spinning together against one alone. Shared or throttled machines give
    fewer than os.cpu_count(), and no parallel run can beat that."""

    def spin(count: int) -> float:
        procs = [
            subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
            for _ in range(count)
        ]
        return max(float(p.communicate()[0]) for p in procs)

    return workers * spin(1) / spin(workers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--scale", type=int, default=1, help="multiply every size (2 to 6) by this: heavier cases"
    )
    args = parser.parse_args()

    python = sys.executable
    pytest = [python, "-m", "pytest", "--gradcheck", ".", "-q", "-p", "no:cacheprovider"]
    cli = "from gradcheck.cli import main; main()"
    gradcheck = [python, "-c", cli, "run", ".", "--no-cache", "-q"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_suite(folder, args.cases, args.scale)
        runs = {
            "pytest --gradcheck (serial)": pytest,
            f"pytest --gradcheck -n {args.workers}": [*pytest, "-n", str(args.workers)],
            "gradcheck run (CLI)": gradcheck,
        }
        results = {label: timed(cmd, folder, args.repeats) for label, cmd in runs.items()}
    capacity = effective_cpus(args.workers)

    print(
        f"{args.cases} cases (sizes 2 to 6 times {args.scale}), best of {args.repeats}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end"
    )
    for label, (seconds, last) in results.items():
        print(f"  {label:<30}{seconds:>7.2f}s   {last}")
    serial = results["pytest --gradcheck (serial)"][0]
    parallel = results[f"pytest --gradcheck -n {args.workers}"][0]
    print(
        f"speed-up with -n {args.workers}: {serial / parallel:.2f}x "
        f"(this machine runs {capacity:.1f} CPU-bound processes at once: the ceiling)"
    )


if __name__ == "__main__":
    main()
