"""The edit-check loop under `run --watch`: from saving a case file to its verdict.

A `gradcheck run --watch` subprocess checks a small case (against TensorFlow, no cache,
the builtin engine, or `--engine`'s); once its first round is done (TensorFlow
imported, the engine warm), the case file is saved again and again, each time with a
new seed so the reference is computed afresh, and the time from the save (just before
the rename an editor does) to the round's summary line is taken. The baseline is the
same check as one cold `gradcheck run` of the file, timed end to end. Target (issue 24):
save to verdict under 1 s, warm.

    python bench/loop.py [--saves N] [--engine SPEC]
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TARGET_S = 1.0
CASE = """\
cases:
  - name: mlp
    expr: sum(tanh(matmul(x, w) + b))
    dtype: float64
    cotangent: random
    seed: {seed}
    inputs:
      x: {{shape: [4, 8], init: normal}}
      w: {{shape: [8, 3], init: normal}}
      b: {{shape: [3], init: normal}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=9)
    parser.add_argument("--engine", default="builtin")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        case = folder / "case.yaml"
        case.write_text(CASE.format(seed=0))
        command = [sys.executable, "-m", "gradcheck", "run", "--no-cache", "--engine", args.engine]

        started = time.perf_counter()
        cold = subprocess.run([*command, str(case)], cwd=folder, capture_output=True, text=True)
        cold_s = time.perf_counter() - started
        assert cold.returncode == 0, cold.stdout + cold.stderr

        watch = subprocess.Popen(
            [*command, "--watch", str(case)],
            cwd=folder,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(
            target=lambda: [lines.put(line) for line in watch.stdout], daemon=True
        ).start()

        def until(word: str) -> float:
            while True:
                line = lines.get(timeout=300)
                if word in line:
                    return time.perf_counter()

        until("waiting for a save")  # the first round: TensorFlow imported, the engine warm
        latencies = []
        for seed in range(1, args.saves + 1):
            temporary = folder / ".case.yaml.swp"
            temporary.write_text(CASE.format(seed=seed))
            saved = time.perf_counter()
            os.replace(temporary, case)
            latencies.append(until(" passed in ") - saved)
            until("waiting for a save")
        watch.stdin.write("q\n")
        watch.stdin.flush()
        watch.wait(timeout=60)

    median = statistics.median(latencies)
    print(f"engine {args.engine}, TensorFlow reference, no cache, {args.saves} saves")
    print(f"cold `gradcheck run` of the case: {cold_s:.2f} s")
    print(
        f"--watch, save to verdict: median {median:.3f} s, min {min(latencies):.3f}, "
        f"max {max(latencies):.3f} (target {TARGET_S:.1f} s) -> "
        f"{median / cold_s:.3f}x the cold run"
    )


if __name__ == "__main__":
    main()
