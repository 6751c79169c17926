"""Start-up: the wall time of the commands a new user types first, in fresh interpreters.

`gradcheck --version`, `gradcheck ops`, `gradcheck list cases/` and `gradcheck check
--help` (`run --help` where this branch has no `check` command) are each run as the
installed console script, best and median of N runs taken in turn, against `python -c
pass` (the interpreter's own start-up) run in the same loop. Target (issue 9): each under
0.3 s. Each command is timed twice more, from a folder whose pyproject.toml has a
`[tool.gradcheck]` table and from one with none, to show that finding and reading the
config file adds no measurable time. Beside the wall time, the least CPU time a run took:
on a machine other jobs load, it wanders far less.

The interpreters may write bytecode even where PYTHONDONTWRITEBYTECODE is set: an
installed package ships its .pyc files, and without them each run would compile the
modules it imports again (~0.07 s for `list`), which no user pays.

    python bench/startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.3
BIN = Path(sys.executable).parent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def commands() -> dict[str, list[str]]:
    gradcheck = str(BIN / "gradcheck")
    has_check = subprocess.run([gradcheck, "check", "--help"], capture_output=True).returncode == 0
    help_command = "check" if has_check else "run"
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "gradcheck --version": [gradcheck, "--version"],
        "gradcheck ops": [gradcheck, "ops"],
        "gradcheck list cases/": [gradcheck, "list", "cases/"],
        f"gradcheck {help_command} --help": [gradcheck, help_command, "--help"],
    }


def project(with_config: bool) -> Path:
    """A folder holding the shipped cases, with or without a config file."""
    folder = Path(tempfile.mkdtemp(prefix="gradcheck-startup-"))
    shutil.copytree(ROOT / "cases", folder / "cases")
    text = '[project]\nname = "demo"\n'
    if with_config:
        text += '\n[tool.gradcheck]\npaths = ["cases"]\nreference = "tensorflow"\n'
    (folder / "pyproject.toml").write_text(text)
    return folder


def timed(command: list[str], cwd: Path) -> tuple[float, float]:
    """The wall time of `command`, and the CPU time (user + system) it took."""
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    folders = {"config": project(True), "none": project(False)}
    named = commands()
    times: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    try:
        for label in named.values():  # warm the file cache, write the bytecode once
            timed(label, folders["none"])
        for _ in range(args.repeats):  # in turn, so a drift of the machine hits all alike
            for where, folder in folders.items():
                for name, command in named.items():
                    wall, used = timed(command, folder)
                    times.setdefault((name, where), []).append(wall)
                    cpu.setdefault((name, where), []).append(used)
    finally:
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)
    base = min(times[("python -c pass", "none")])
    header = f"{'command':28} {'best':>7} {'median':>7} {'- python':>9} {'config':>8} {'cpu':>7}"
    print(f"{header}  target")
    for name in named:
        best, median = min(times[(name, "none")]), statistics.median(times[(name, "none")])
        with_config = min(times[(name, "config")])
        verdict = "" if name.startswith("python") else ("ok" if best < TARGET_S else "OVER")
        print(
            f"{name:28} {best:6.3f}s {median:6.3f}s {best - base:+8.3f}s "
            f"{with_config - best:+7.3f}s {min(cpu[(name, 'none')]):6.3f}s  {verdict}"
        )
    print(
        f"wall time, best and median of {args.repeats} runs, no config file; `- python`: over "
        "the interpreter's start-up; `config`: the best run from a folder with "
        "[tool.gradcheck] minus the best without; `cpu`: the least CPU time (user + system) "
        "a run took, which other jobs on the machine disturb less than its wall time; "
        f"target {TARGET_S} s"
    )


if __name__ == "__main__":
    main()
