"""The thread budget (`runner.threads`, ``--threads``): the engine's worker and TensorFlow
sized to fit the cores while both run, and an engine running alone left as it is.

The engine here is the builtin engine in a real worker process, printing how many
threads its BLAS library has (threadpoolctl's view) while it builds the case; what it
prints is captured with the case.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck.cases import load_file
from gradcheck.errors import UsageError
from gradcheck.references.cache import ReferenceCache
from gradcheck.runner import Checker, RunOptions
from gradcheck.runner.threads import ThreadBudget, thread_budget

ENGINE = """\
from threadpoolctl import threadpool_info

from gradcheck.engines.builtin.engine import BuiltinEngine


class Engine(BuiltinEngine):
    def tanh(self, x):
        blas = sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        print(f"blas threads {blas}")
        return super().tanh(x)
"""
CASES = """\
cases:
  - name: small
    expr: sum(tanh(x @ y))
    inputs:
      x: {shape: [3, 4]}
      y: {shape: [4, 2]}
"""


@pytest.mark.parametrize(
    ("setting", "cores", "budget"),
    [
        ("auto", 2, (1, 1)),
        ("auto", 1, (1, 1)),  # never worse than sequential on one core: one thread each
        ("auto", 3, (1, 2)),
        ("auto", 8, (4, 4)),
        ("1:3", 2, (1, 3)),
    ],
)
def test_auto_splits_the_cores_and_ref_engine_sets_both(
    setting: str, cores: int, budget: tuple[int, int]
) -> None:
    assert thread_budget(setting, cores) == ThreadBudget(*budget, cores)


def test_off_limits_nothing_and_a_wrong_spelling_is_a_usage_error() -> None:
    assert thread_budget("off", 2) is None
    for wrong in ("2", "0:1", "a:b", "1:2:3", ""):
        with pytest.raises(UsageError, match="auto, off or REF:ENGINE"):
            thread_budget(wrong, 2)


def written(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "cases.yaml").write_text(CASES)
    return tmp_path / "engine.py", tmp_path / "cases.yaml"


def blas_threads(captured: str) -> set[str]:
    return {line for line in captured.splitlines() if line.startswith("blas threads")}


def test_the_worker_is_limited_only_while_the_reference_is_computed_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker starts with two BLAS threads (OPENBLAS_NUM_THREADS, inherited): limited
    to one while this process computes the case's reference, its own two once the
    reference is cached and the engine runs alone."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    engine, cases = written(tmp_path)
    options = RunOptions(
        isolate="process", threads="1:1", cache=ReferenceCache(tmp_path / "cache"), diagnose=False
    )
    with Checker(f"{engine}:Engine", options) as checker:
        computed = checker.check(load_file(cases)[0])
        cached = checker.check(load_file(cases)[0])
    assert computed.status == cached.status == "passed", (computed.message, cached.message)
    assert blas_threads(computed.captured) == {"blas threads [1]"}, computed.captured
    assert blas_threads(cached.captured) == {"blas threads [2]"}, cached.captured


def test_threads_off_and_in_process_engines_are_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    engine, cases = written(tmp_path)
    off = RunOptions(isolate="process", threads="off", diagnose=False)
    with Checker(f"{engine}:Engine", off) as checker:
        result = checker.check(load_file(cases)[0])
        assert checker.threads == "threads: left alone (--threads off)"
    assert blas_threads(result.captured) == {"blas threads [2]"}, result.captured
    with Checker(f"{engine}:Engine", RunOptions(isolate="none", threads="1:1")) as checker:
        assert checker.budget is None
        assert "left alone (the engine runs in this process" in checker.threads


def test_verbose_reports_the_budget_tensorflow_was_started_with(tmp_path: Path) -> None:
    """In a fresh process, as a user runs it: TensorFlow's intra-op threads are set at its
    import, and -v says so (with no note that TensorFlow had other threads already)."""
    engine, cases = written(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", "from gradcheck.cli import main; main()", "run", str(cases),
         "--engine", f"{engine}:Engine", "--no-cache", "--threads", "1:1", "-v"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "threads while both run: TensorFlow 1, the engine's worker 1 (of " in done.stdout
    assert "started with" not in done.stdout
