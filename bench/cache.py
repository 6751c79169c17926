"""What the reference cache saves: the shipped suite cold (empty cache) vs fully cached.

Each run is `gradcheck run cases/ -q --cache-dir DIR` in a fresh interpreter, timed end
to end (interpreter start, imports, TensorFlow or the cache, report). The interpreter
runs a small wrapper that invokes the CLI and then reports whether `tensorflow` ended
up in `sys.modules`, so that "a cached run does not import TensorFlow" is checked, not
assumed; the cold run must import it, or the check would prove nothing. The cached
run's JSON report must equal the cold run's (timings aside). Target (issue 4): the
cached run at least 5x faster.

    python bench/cache.py [cases/] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 5.0
MARKER = "tensorflow imported: "
WRAPPER = f"""
import sys
from gradcheck.cli import main
sys.argv = ["gradcheck", *sys.argv[1:]]
try:
    main()
    code = 0
except SystemExit as e:
    code = e.code
sys.stderr.write("\\n{MARKER}" + str("tensorflow" in sys.modules) + "\\n")
sys.exit(code)
"""


def gradcheck(paths: list[str], cache_dir: Path, *extra: str) -> tuple[float, bool, str]:
    """One end-to-end run: wall time, whether TensorFlow was imported, the stdout."""
    command = [sys.executable, "-c", WRAPPER, "run", *paths, "--cache-dir", str(cache_dir)]
    started = time.perf_counter()
    done = subprocess.run([*command, *extra], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    lines = done.stderr.strip().splitlines()
    if done.returncode not in (0, 1) or not lines or not lines[-1].startswith(MARKER):
        sys.exit(f"gradcheck exited {done.returncode}:\n{done.stderr}")
    return elapsed, lines[-1] == f"{MARKER}True", done.stdout


def without_durations(report: str) -> dict:
    """The report less its timings: each duration, and TensorFlow's start-up (none when
    everything is cached)."""
    data = json.loads(report)
    data["summary"].pop("startup_s", None)
    for timed in [data["summary"], *data["cases"]]:
        timed.pop("duration_s", None)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["cases"])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind (median)")
    args = parser.parse_args()

    cold_times, cached_times, problems = [], [], []
    for _ in range(args.repeats):
        cache_dir = Path(tempfile.mkdtemp(prefix="gradcheck-bench-cache-"))
        try:
            elapsed, imported, _ = gradcheck(args.paths, cache_dir, "-q")
            cold_times.append(elapsed)
            if not imported:
                problems.append("the cold run did not import TensorFlow: the check is blind")
            elapsed, imported, _ = gradcheck(args.paths, cache_dir, "-q")
            cached_times.append(elapsed)
            if imported:
                problems.append("the fully cached run imported TensorFlow")
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)

    # Same results: one more cold/cached pair, as JSON reports.
    cache_dir = Path(tempfile.mkdtemp(prefix="gradcheck-bench-cache-"))
    try:
        _, _, cold_report = gradcheck(args.paths, cache_dir, "-f", "json")
        _, imported, cached_report = gradcheck(args.paths, cache_dir, "-f", "json")
        entries = sum(1 for p in cache_dir.rglob("*") if p.is_file())
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    cold_json, cached_json = without_durations(cold_report), without_durations(cached_report)
    if imported:
        problems.append("the fully cached JSON run imported TensorFlow")
    if cold_json != cached_json:
        problems.append("the cached run's report differs from the cold run's")

    cold, cached = statistics.median(cold_times), statistics.median(cached_times)
    ratio = cold / cached
    print(f"{len(cold_json['cases'])} cases, {entries} cache entries, median of {args.repeats}")
    print(f"cold (empty cache):  {cold:6.2f} s   runs: {', '.join(f'{t:.2f}' for t in cold_times)}")
    print(
        f"fully cached:        {cached:6.2f} s   runs: "
        f"{', '.join(f'{t:.2f}' for t in cached_times)}"
    )
    verdict = "met" if ratio >= TARGET else "MISSED"
    print(f"speed-up {ratio:.1f}x (target >= {TARGET:.0f}x: {verdict})")
    leaked = any("cached" in p and "imported" in p for p in problems)
    print(f"TensorFlow imported in a cached run: {'YES' if leaked else 'no'}")
    print(f"cached report equals the cold one: {'yes' if cold_json == cached_json else 'NO'}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
