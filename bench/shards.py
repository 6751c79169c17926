"""`run --shard K/N` and `gradcheck merge` against one run of the whole suite.

Generates the suite `bench/parallel.py` does (600 small cases by default), then, each
`gradcheck` command a fresh process, with an engine whose tanh VJP is wrong (so that
some cases fail and the merge has root causes to recompute; `--engine` for another):

1. one run that fills the reference cache and keeps every case's duration beside it,
   as a CI's references job does (not timed);
2. the whole suite in one run on that cache (`--require-cache`, as the shards run);
3. shard K of 3 for each K, one after the other (on a CI, three machines at once);
4. `gradcheck merge` of the three shards' JSON reports.

It prints each shard's case time (the report's `duration_s`, start-up left out) and
wall time against the one run's, whether each shard got about a third of the cases'
time, and whether the merged report holds the one run's verdicts (every case's status
and each input's) and its root causes. Target (issue 24): the same report, each shard
about a third of the time.

    python bench/shards.py [--cases 600] [--shards 3] [--engine SPEC]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from parallel import write_suite

# tanh's VJP computed from its input, not its output: the suite's tanh cases fail, so
# the merged report has root causes to recompute.
PLANTED = f"{Path(__file__).resolve().parents[1] / 'tests' / 'planted_engines.py'}:TanhFromInput"


def gradcheck(*args: object, cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    command = [sys.executable, "-m", "gradcheck", *map(str, args)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    return time.perf_counter() - started, done


def verdicts(report: dict) -> list:
    return sorted(
        (c["file"], c["name"], c["status"], [(i["name"], i["status"]) for i in c["inputs"]])
        for c in report["cases"]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=600)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--engine", default=PLANTED, help="default: a planted tanh bug")
    args = parser.parse_args()
    n = args.shards
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "cases").mkdir()
        write_suite(folder / "cases", args.cases)
        common = ["cases", "--engine", args.engine, "--cache-dir", "cache", "-q"]
        gradcheck("run", *common, cwd=folder)  # fills the cache and the durations

        whole_s, _ = gradcheck("run", *common, "--require-cache", "-o", "whole.json",
                               cwd=folder)  # fmt: skip
        whole = json.loads((folder / "whole.json").read_text())
        shard_s, parts = [], []
        for k in range(1, n + 1):
            wall, _ = gradcheck("run", *common, "--require-cache", "--shard", f"{k}/{n}",
                                "-o", f"shard{k}.json", cwd=folder)  # fmt: skip
            shard_s.append(wall)
            parts.append(json.loads((folder / f"shard{k}.json").read_text()))
        merge_s, _ = gradcheck("merge", *[f"shard{k}.json" for k in range(1, n + 1)],
                               "-q", "-o", "merged.json", cwd=folder)  # fmt: skip
        merged = json.loads((folder / "merged.json").read_text())

    one = whole["summary"]["duration_s"]
    print(
        f"{args.cases} cases, engine {Path(args.engine).name}, references cached (--require-cache)"
    )
    print(f"one run: cases {one:.2f} s, wall {whole_s:.2f} s")
    for k, (part, wall) in enumerate(zip(parts, shard_s, strict=True), 1):
        cases_s = part["summary"]["duration_s"]
        print(
            f"shard {k}/{n}: {len(part['cases'])} cases, cases {cases_s:.2f} s "
            f"({cases_s / one:.2f}x the one run's), wall {wall:.2f} s ({wall / whole_s:.2f}x)"
        )
    slowest = max(p["summary"]["duration_s"] for p in parts)
    print(f"slowest shard's cases {slowest / one:.2f}x the one run's (a third: {1 / n:.2f}x)")
    same = verdicts(merged) == verdicts(whole)
    causes = merged["summary"]["root_causes"] == whole["summary"]["root_causes"]
    print(f"merge: wall {merge_s:.2f} s; same verdicts: {same}; same root causes: {causes}")
    return 0 if same and causes else 1


if __name__ == "__main__":
    sys.exit(main())
