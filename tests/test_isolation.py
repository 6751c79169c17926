"""Hostile engines: nothing an engine does can end, hang or falsely green a run.

The command line runs in a subprocess, as a user's shell or CI would run it, with
`hostile_engine.py`: its cases misbehave one way each (exit, sys.exit, segfault, hang,
leftover thread, chdir, complex gradients, an unprintable exception, prints), each
between well-behaved neighbours that must still pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import load_file

HERE = Path(__file__).resolve().parent
ENGINE = str(HERE / "hostile_engine.py")
CLI = [sys.executable, "-c", "from gradcheck.cli import main; main()"]


def gradcheck(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 240):
    return subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,  # a run that hangs fails the test instead of the suite
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})},
    )


def case(name: str, *inputs: str, extra: str = "") -> str:
    expr = " + ".join(f"sum({i} * {i})" for i in inputs)
    specs = ", ".join(f"{i}: {{shape: [3]}}" for i in inputs)
    return f"  - name: {name}\n    expr: {expr}\n    inputs: {{{specs}}}\n{extra}"


def write(folder: Path, *cases: str, name: str = "hostile.yaml") -> Path:
    path = folder / name
    path.write_text("cases:\n" + "".join(cases))
    return path


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["cases"]}


HOSTILE = [
    case("before", "x"),
    case("exits_0", "exit0"),
    case("after_exit", "x"),
    case("calls_sys_exit", "sysexit"),
    case("segfaults", "segv"),
    case("out_of_memory", "oom"),
    case("hangs", "hang", extra="    timeout: 2\n"),
    case("leaves_a_thread", "thread"),
    case("moves_the_cwd", "chdir"),
    case("complex_gradients", "cplx"),
    case("unprintable_exception", "badstr"),
    case("chatty", "chatty"),
    case("scribbles_on_inputs", "scribble"),
    case("last", "x"),
]


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """One isolated run of every misbehaviour, JSON on stdout."""
    folder = tmp_path_factory.mktemp("hostile")
    write(folder, *HOSTILE)
    started = time.perf_counter()
    done = gradcheck("run", "hostile.yaml", "--engine", ENGINE, "--format", "json", cwd=folder)
    done.elapsed = time.perf_counter() - started  # type: ignore[attr-defined]
    return done, json.loads(done.stdout), folder


def test_a_hostile_engine_cannot_end_the_run_or_set_its_verdict(hostile_run) -> None:
    done, report, _ = hostile_run
    assert done.returncode == 1, done.stderr
    statuses = {name: c["status"] for name, c in by_name(report).items()}
    assert statuses == {
        "before": "passed",
        "exits_0": "error",
        "after_exit": "passed",
        "calls_sys_exit": "error",
        "segfaults": "error",
        "out_of_memory": "error",
        "hangs": "error",
        "leaves_a_thread": "passed",
        "moves_the_cwd": "passed",
        "complex_gradients": "error",
        "unprintable_exception": "error",
        "chatty": "passed",
        "scribbles_on_inputs": "passed",
        "last": "passed",
    }
    assert report["summary"]["error"] == 7 and report["summary"]["passed"] == 7


@pytest.mark.parametrize(
    "name, words",
    [
        ("exits_0", "the engine process exited with status 0 during grad()"),
        ("calls_sys_exit", "grad raised SystemExit (the engine called sys.exit(3))"),
        ("segfaults", "the engine process was killed by SIGSEGV during grad()"),
        (
            "out_of_memory",
            "the engine process was killed by SIGKILL (out of memory?) during grad()",
        ),
        ("hangs", "timed out after 2 s in grad()"),
        ("complex_gradients", "complex values"),
        ("unprintable_exception", "grad raised Unprintable: <Unprintable whose str() raised>"),
    ],
)
def test_each_misbehaviour_is_reported_for_what_it_was(hostile_run, name, words) -> None:
    _, report, _ = hostile_run
    assert words in by_name(report)[name]["message"]


def test_a_crash_shows_the_engine_s_last_words(hostile_run) -> None:
    _, report, _ = hostile_run
    captured = by_name(report)["segfaults"]["captured"]
    assert "Segmentation fault" in captured and "hostile_engine.py" in captured


def test_a_leftover_thread_does_not_hold_the_run(hostile_run) -> None:
    done, _, _ = hostile_run
    # The thread sleeps an hour; the run (a 2 s timeout among its cases) ends long before.
    assert done.elapsed < 200  # type: ignore[attr-defined]


def test_a_moved_cwd_moves_neither_the_cache_nor_later_cases(hostile_run) -> None:
    _, _, folder = hostile_run
    entries = list((folder / ".gradcheck_cache").rglob("*.ref"))
    # Every case's reference was computed, and cached in the run's folder.
    assert len(entries) == len(HOSTILE)
    assert not Path("/.gradcheck_cache").exists()


def test_what_the_engine_prints_is_captured_with_its_case_not_in_the_report(hostile_run):
    done, report, folder = hostile_run
    chatty = by_name(report)["chatty"]["captured"]
    assert {"to stdout", "to stderr", "to fd 1"} <= set(chatty.splitlines()[1:])
    assert "to stdout" not in done.stdout.replace(json.dumps(chatty), "")
    # What crossed to the worker is the case's input, bit for bit.
    (case,) = [c for c in load_file(folder / "hostile.yaml") if c.name == "chatty"]
    digest = hashlib.sha256(np.ascontiguousarray(case.inputs["chatty"]).tobytes()).hexdigest()
    assert f"leaf chatty sha256 {digest}" in chatty


def test_an_engine_writing_into_its_inputs_does_not_change_the_verdict(hostile_run) -> None:
    _, report, _ = hostile_run
    scribbled = by_name(report)["scribbles_on_inputs"]
    assert scribbled["status"] == "passed" and scribbled["inputs"][0]["max_abs_diff"] == 0


def test_the_rich_report_shows_captured_output_with_its_failing_case(tmp_path) -> None:
    write(tmp_path, case("chatty_fails", "chatty", extra="    expect: {chatty: [9, 9, 9]}\n"))
    done = gradcheck("run", "hostile.yaml", "--engine", ENGINE, cwd=tmp_path)
    assert done.returncode == 1
    block = done.stdout.split("captured output:", 1)[1]
    assert "to stdout" in block and "to fd 1" in block


def test_in_process_engines_cannot_exit_or_hold_the_run_either(tmp_path) -> None:
    cases = [
        case("calls_sys_exit", "sysexit"),
        case("complex_gradients", "cplx"),
        case("unprintable_exception", "badstr"),
        case("moves_the_cwd", "chdir"),
        case("leaves_a_thread", "thread"),
        case("last", "x"),
    ]
    write(tmp_path, *cases)
    args = ["run", "hostile.yaml", "--engine", ENGINE, "--isolate", "none"]
    done = gradcheck(*args, "--format", "json", "--output", "out/report.json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())  # relative to the run
    statuses = [c["status"] for c in report["cases"]]
    assert statuses == ["error", "error", "error", "passed", "passed", "passed"]
    assert "SystemExit" in report["cases"][0]["message"]


def test_an_engine_that_dies_while_diagnosed_keeps_its_verdict(tmp_path) -> None:
    write(tmp_path, case("doubled", "x"), case("after", "y"))
    done = gradcheck(
        "run", "hostile.yaml", "--engine", f"{ENGINE}:DiesDiagnosing", "--format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    report = by_name(json.loads(done.stdout))
    assert done.returncode == 1
    assert report["doubled"]["status"] == "failed"
    assert report["doubled"]["inputs"][0]["status"] == "failed"
    assert (
        "diagnosis stopped: the engine process was killed by SIGSEGV"
        in (report["doubled"]["message"])
    )
    assert report["after"]["status"] == "failed"  # a fresh worker checked it


@pytest.mark.parametrize(
    "source, words",
    [
        ("raise ImportError('no such helper')", "ImportError: no such helper"),
        ("import sys; sys.exit(4)", "SystemExit"),
        ("import os; os._exit(5)", "exited with status 5 while importing the engine"),
    ],
)
def test_an_engine_that_cannot_be_imported_is_a_usage_error(tmp_path, source, words) -> None:
    (tmp_path / "broken.py").write_text(source + "\n")
    write(tmp_path, case("one", "x"))
    done = gradcheck("run", "hostile.yaml", "--engine", "broken.py", cwd=tmp_path)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr


# -- signals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sig, code, isolate",
    [
        (signal.SIGINT, 130, "process"),
        (signal.SIGTERM, 143, "process"),
        (signal.SIGTERM, 143, "none"),
    ],
)
def test_a_signal_ends_the_run_with_a_full_report(tmp_path, sig, code, isolate) -> None:
    write(tmp_path, case("first", "x"), case("stuck", "marked"), case("third", "y"))
    mark = tmp_path / "mark"
    args = ["run", "hostile.yaml", "--engine", ENGINE, "--isolate", isolate]
    process = subprocess.Popen(
        [*CLI, *args, "--format", "json", "--output", "report.json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOSTILE_MARK": str(mark), "NO_COLOR": "1"},
    )
    wait_for(mark, process)
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert [c["status"] for c in report["cases"]] == ["passed", "not run", "not run"]
    name = sig.name
    assert report["summary"]["interrupted"] == name and report["summary"]["not_run"] == 2
    assert f"interrupted by {name}: 1 passed, 2 not run" in stdout
    assert not list(tmp_path.rglob("*.tmp"))  # no half-written report or cache entry
    if isolate == "process":  # the worker went with the run
        with pytest.raises(ProcessLookupError):
            os.kill(int(mark.read_text()), 0)


def wait_for(mark: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while not mark.exists() or not mark.read_text():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)


def test_a_signal_before_any_case_ran_exits_with_the_signal_s_code(tmp_path) -> None:
    # An engine whose import (in this process, before any case) takes a while.
    (tmp_path / "slow.py").write_text(
        "import os, time\nopen(os.environ['HOSTILE_MARK'], 'w').write('1')\ntime.sleep(60)\n"
    )
    write(tmp_path, case("one", "x"))
    mark = tmp_path / "mark"
    process = subprocess.Popen(
        [*CLI, "run", "hostile.yaml", "--engine", "slow.py", "--isolate", "none"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOSTILE_MARK": str(mark)},
    )
    wait_for(mark, process)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143
    assert "interrupted by SIGTERM before any case ran" in stderr


@pytest.mark.parametrize("shape", [[3, 4], [400, 300]], ids=["sent-drawn", "drawn-in-worker"])
def test_inputs_are_the_case_s_bits_in_the_worker(shape) -> None:
    """A small case crosses with its arrays, a large one with its random specs, drawn again
    in the worker: either way the engine gets exactly the parent's numbers."""
    from gradcheck import check
    from gradcheck.cases.loader import load_case

    data = {"name": "bits", "expr": "sum(chatty * chatty)", "inputs": {"chatty": {"shape": shape}}}
    result = check(data["expr"], data["inputs"], engine=ENGINE, name="bits")
    assert result.status == "passed"
    parent = load_case(data).inputs["chatty"]
    digest = hashlib.sha256(np.ascontiguousarray(parent).tobytes()).hexdigest()
    assert f"leaf chatty sha256 {digest}" in result.captured


def test_a_process_checking_many_engines_keeps_only_a_few_idle_workers(tmp_path) -> None:
    """Each finished run keeps its worker for a next run with the same engine; a process
    that checks many engines (a notebook, a test suite) must not gather one per engine."""
    from gradcheck import check
    from gradcheck.runner.workers import pool

    source = (HERE.parent / "examples" / "tiny_engine.py").read_text()
    started = []
    for i in range(pool.KEPT_WORKERS + 3):
        engine = tmp_path / f"engine_{i}.py"
        engine.write_text(source)
        assert check("sum(x * x)", {"x": [2, 3]}, engine=str(engine), isolate="process").passed
        started.append(next(reversed(pool._KEPT.values())).process)
    assert len(pool._KEPT) <= pool.KEPT_WORKERS
    for process in started[: -pool.KEPT_WORKERS]:
        assert process.wait(timeout=30) is not None, "an idle worker beyond the cap lives on"
