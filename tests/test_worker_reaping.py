"""An engine's children that call `setsid()` die with its worker (issue 22): they left
the worker's process group, which was all a worker's end killed, and outlived the run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gradcheck.runner.workers.pool import SUPPORTED

pytestmark = pytest.mark.skipif(
    not (SUPPORTED and os.path.isdir("/proc")), reason="Linux: descendants found in /proc"
)

# Each sleeper writes its pid to a file of its own, then sleeps for ten minutes:
# `setsid` one in a session of its own, `orphan` a grandchild whose setsid parent exits
# at once (so it is an orphan, re-parented away from the worker's tree).
ENGINE = """\
import subprocess
import sys

from gradcheck.engines.builtin.engine import BuiltinEngine

SLEEP = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
ORPHAN = (
    "import subprocess, sys; subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]],"
    " start_new_session=True)"
)


class Engine(BuiltinEngine):
    name = "spawner"

    def grad(self, output, wrt, cotangent, create_graph=False):
        here = {folder!r}
        sleeper = [sys.executable, "-c", SLEEP, here + "/setsid.pid"]
        subprocess.Popen(sleeper, start_new_session=True)
        subprocess.run([sys.executable, "-c", ORPHAN, SLEEP, here + "/orphan.pid"], check=True)
        return super().grad(output, wrt, cotangent, create_graph)
"""
CASES = """\
cases:
  - name: spawns
    expr: sum(x * x)
    inputs: {x: [1.0, 2.0]}
"""


def alive(pid: int) -> bool:
    """Running, not a zombie (a container's init may never reap what it inherits)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"


def wait_for(path: Path) -> int:
    for _ in range(600):  # the orphan writes its pid a moment after its parent is done
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


OPTIONS = ("--reference", "numeric", "--no-cache", "--isolate", "process")


def test_setsid_children_and_their_orphans_die_with_the_run(tmp_path: Path) -> None:
    (tmp_path / "spawner.py").write_text(ENGINE.format(folder=str(tmp_path)))
    (tmp_path / "cases.yaml").write_text(CASES)
    done = subprocess.run(
        [sys.executable, "-m", "gradcheck", "run", "cases.yaml", "-e", "spawner.py", *OPTIONS],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    pids = {name: wait_for(tmp_path / f"{name}.pid") for name in ("setsid", "orphan")}
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 passed" in done.stdout
        assert {name: alive(pid) for name, pid in pids.items()} == {
            "setsid": False,
            "orphan": False,
        }
    finally:
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, 9)
