"""`gradcheck run --watch` with real file events: a subprocess watches, the test saves
files and reads each round's verdict (issue 24). The numeric reference keeps TensorFlow's
import out of the test's time; the rounds are the same with TensorFlow's."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

CASES = """\
cases:
  - name: tanh_sum
    expr: sum(tanh(x))
    dtype: float64
    inputs:
      x: {shape: [3], init: normal}
"""
SECOND = """\
  - name: sin_mul
    expr: sin(x) * y
    dtype: float64
    inputs:
      x: {shape: [3], init: normal}
      y: {shape: [3], init: normal}
"""
ENGINE = """\
import helper
from gradcheck.engines.builtin.engine import BuiltinEngine


class Engine(BuiltinEngine):
    def backward(self, output, cotangent):
        helper.pause()
        return super().backward(output, cotangent)
"""
# tanh's VJP from its input instead of its output: the catalogue's tanh.from-input.
FAULTY = """\
import helper
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine


class Engine(FaultyEngine):
    def __init__(self):
        super().__init__(FAULTS["tanh.from-input"])
"""
HELPER = "def pause():\n    pass\n"
HANGS = "import time\n\n\ndef pause():\n    time.sleep(60)\n"
WAITING = "waiting for a save"


class Watching:
    """`gradcheck run --watch` in a subprocess; `round()` reads one round's lines."""

    def __init__(self, folder: Path, *args: str, command: str = "run") -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gradcheck", command, *args, "--watch"],
            cwd=folder,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def round(self, timeout: float = 240) -> list[str]:
        """The lines up to the next waiting line."""
        got: list[str] = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.process.poll() is None, f"the watch ended: {got}"
                continue
            got.append(line)
            if WAITING in line:
                return got
        raise AssertionError(f"no verdict within {timeout}s: {got}")

    def quit(self, how: str = "q") -> int:
        if how == "q":
            assert self.process.stdin is not None
            self.process.stdin.write("q\n")
            self.process.stdin.flush()
        else:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=60)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "cases.yaml").write_text(CASES)
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "helper.py").write_text(HELPER)
    return tmp_path


def save(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one."""
    temporary = path.with_name(f".{path.name}.swp")
    temporary.write_text(text)
    os.replace(temporary, path)


def test_each_save_gets_a_round_and_q_exits_with_the_latest_verdicts(folder: Path) -> None:
    args = ["cases.yaml", "--engine", "engine.py", "--reference", "numeric", "--timeout", "8"]
    watching = Watching(folder, *args)
    try:
        first = watching.round()
        assert "1 passed" in " ".join(first), first

        save(folder / "engine.py", FAULTY)  # the engine restarts, a fresh import
        faulty = watching.round()
        assert any("engine.py changed: the engine restarts" in line for line in faulty), faulty
        failed = [line for line in faulty if line.startswith("FAILED cases.yaml::tanh_sum")]
        assert failed and "tanh" in failed[0], faulty  # its top hint, on the line
        assert any(line.startswith("1 failed") for line in faulty), faulty
        assert all(len(line) <= 80 for line in faulty), faulty
        assert "exit code 1" in faulty[-1]

        save(folder / "cases.yaml", CASES + "  - name: [\n")  # a syntax error
        broken = watching.round()
        assert any(line.startswith("INVALID") for line in broken), broken

        save(folder / "engine.py", ENGINE)
        fixed = watching.round()
        assert any("1 invalid" in line for line in fixed), fixed  # every case again

        save(folder / "cases.yaml", CASES + SECOND)  # only this file's cases
        both = watching.round()
        assert any(line.startswith("2 passed") for line in both), both

        save(folder / "helper.py", HANGS)  # a file the engine imports: it restarts, and hangs
        hung = watching.round()
        assert any("helper.py changed" in line for line in hung), hung
        assert any(line.startswith("ERROR cases.yaml::tanh_sum") for line in hung), hung
        assert "exit code 1" in hung[-1]

        save(folder / "helper.py", HELPER)
        assert any(line.startswith("2 passed") for line in watching.round())
        assert watching.quit("q") == 0
    finally:
        watching.kill()


def test_a_deleted_case_file_and_ctrl_c(folder: Path) -> None:
    (folder / "more").mkdir()
    (folder / "more" / "other.yaml").write_text(CASES.replace("tanh_sum", "other"))
    watching = Watching(folder, ".", "--engine", "engine.py", "--reference", "numeric")
    try:
        assert any(line.startswith("2 passed") for line in watching.round())
        save(folder / "more" / "other.yaml", CASES.replace("tanh(x)", "tanh(x, 1)"))
        assert any(line.startswith("1 invalid") for line in watching.round())
        (folder / "more" / "other.yaml").unlink()
        gone = watching.round()
        assert any("other.yaml deleted" in line for line in gone), gone
        assert "exit code 0" in gone[-1]  # the invalid case went with its file
        assert watching.quit("ctrl-c") == 0
    finally:
        watching.kill()


OPS = """\
import gradcheck


@gradcheck.op(shape=gradcheck.same_shape, vjps=[lambda g, ans, x: g * {factor} * x ** 2])
def cube(x):
    return x ** 3
"""


def test_check_watch_reloads_a_saved_ops_file(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(OPS.format(factor=3))
    args = ["sum(cube(x))", "-i", "x=3", "--dtype", "float64", "--ops", "ops.py"]
    watching = Watching(tmp_path, *args, "--reference", "numeric", command="check")
    try:
        assert any(line.startswith("1 passed") for line in watching.round())
        save(tmp_path / "ops.py", OPS.format(factor=2))  # a wrong rule
        wrong = watching.round()
        assert any("ops.py changed" in line for line in wrong), wrong
        assert any(line.startswith("FAILED <command line>::check") for line in wrong), wrong
        save(tmp_path / "ops.py", "def (:\n")  # a syntax error: said, and the watch goes on
        broken = watching.round()
        assert any(line.startswith("error: ") and "ops.py" in line for line in broken), broken
        save(tmp_path / "ops.py", OPS.format(factor=3))
        assert any(line.startswith("1 passed") for line in watching.round())
        assert watching.quit("q") == 0
    finally:
        watching.kill()
