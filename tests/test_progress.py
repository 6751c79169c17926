"""Progress and timing: the transient progress bar, `--durations N`, per-case durations."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gradcheck.cli import app, reports

ENV = {"COLUMNS": "200", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
DURATION = re.compile(r"^\d+\.\d\ds \S+::\S+$")
STARTUP = r"(?: \(\+\d+\.\ds TensorFlow start-up\))?"  # when this run imported it
SUMMARY = re.compile(rf"^\d+ passed in \d+\.\d\ds{STARTUP}$")


def write_cases(folder, count: int):
    lines = ["cases:"]
    for i in range(count):
        lines += [
            f"  - name: case_{i}",
            f"    expr: sum(x * y, axis={i % 2})",
            "    inputs: {x: {shape: [2, 3]}, y: {shape: [2, 3]}}",
        ]
    path = folder / f"cases_{count}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever a run writes (a reference cache) lands here
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, ["run", *args], env=ENV)


def terminal_console(monkeypatch) -> None:
    """Make `gradcheck run` believe stdout is a terminal (CliRunner's never is)."""
    monkeypatch.setattr(
        reports,
        "stdout_console",
        lambda *a, **k: Console(force_terminal=True, highlight=False, width=120),
    )


def test_durations_lists_the_slowest_cases_after_the_summary(folder):
    path = write_cases(folder, 4)
    result = run(str(path.name), "--durations", "2")
    assert result.exit_code == 0, result.output
    lines = result.stdout.rstrip().splitlines()
    summary = next(i for i, line in enumerate(lines) if SUMMARY.match(line))
    assert lines[summary + 1 :][0] == "slowest 2 durations"
    listed = lines[summary + 2 :]
    assert len(listed) == 2 and all(DURATION.match(line) for line in listed), listed
    assert listed[0].split()[1].startswith("cases_4.yaml::case_")
    seconds = [float(line.split("s ")[0]) for line in listed]
    assert seconds == sorted(seconds, reverse=True)


def test_durations_zero_lists_every_case_and_json_keeps_stdout_clean(folder):
    path = write_cases(folder, 3)
    every = run(path.name, "--durations", "0", "-q")
    listed = every.stdout.split("slowest durations\n")[1].splitlines()
    assert sorted(line.split("::")[1] for line in listed) == ["case_0", "case_1", "case_2"]
    as_json = run(path.name, "--durations", "1", "--format", "json")
    assert json.loads(as_json.stdout)["summary"]["passed"] == 3
    assert as_json.stderr.startswith("slowest 1 durations\n")
    assert run(path.name).stdout.count("slowest") == 0


def test_no_progress_output_when_not_a_terminal(folder):
    path = write_cases(folder, 8)
    result = run(path.name)
    assert result.exit_code == 0
    assert "\x1b" not in result.output
    assert "checking" not in result.output and "━" not in result.output
    assert result.stdout.count("PASSED") == 8


def test_a_progress_bar_on_a_terminal_for_more_than_five_cases(folder, monkeypatch):
    terminal_console(monkeypatch)
    many = run(write_cases(folder, 8).name)
    assert many.exit_code == 0
    assert "checking" in many.stdout and "8/8" in many.stdout
    assert "\x1b[?25l" in many.stdout  # the bar hides the cursor while it is drawn
    assert many.stdout.count("PASSED") == 8
    few = run(write_cases(folder, 5).name)
    assert "checking" not in few.stdout


def test_no_progress_bar_when_stdout_carries_json_or_junit(folder, monkeypatch):
    terminal_console(monkeypatch)
    path = write_cases(folder, 8)
    as_json = run(path.name, "--format", "json")
    assert json.loads(as_json.stdout)["summary"]["passed"] == 8
    as_junit = run(path.name, "--format", "junit")
    assert as_junit.stdout.lstrip().startswith("<?xml") and "checking" not in as_junit.stdout
    to_file = run(path.name, "--format", "json", "--output", "report.json")
    assert "checking" in to_file.stdout  # the terminal still gets the rich report


def test_case_durations_leave_out_tensorflows_import(tmp_path):
    """In a fresh process the first case pays TensorFlow's import; its duration must not."""
    script = textwrap.dedent(
        """
        import json, sys, time
        from gradcheck import runner
        from gradcheck.references import tensorflow
        from gradcheck.cases import load_file
        from gradcheck.engines.builtin import BuiltinEngine

        case = load_file(sys.argv[1])[0]
        assert "tensorflow" not in sys.modules
        started = time.perf_counter()
        result = runner.check_case(case, BuiltinEngine)
        wall = time.perf_counter() - started
        begun, ended = tensorflow.import_span
        print(json.dumps([result.status, wall, result.duration_s, ended - begun]))
        """
    )
    path = write_cases(tmp_path, 1)
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    ).stdout
    status, wall, duration, startup = json.loads(out.strip().splitlines()[-1])
    assert status == "passed"
    assert startup > 0.1  # importing TensorFlow takes seconds
    assert duration == pytest.approx(wall - startup, abs=0.05)


def test_no_case_outlasts_its_run_while_tensorflow_starts(tmp_path):
    """A case's duration leaves TensorFlow's import out wherever the case waited on it,
    for its reference or for its engine's worker to start: no case of a run takes longer
    than the run (which leaves the whole import out)."""
    tiny = Path(__file__).resolve().parents[1] / "examples" / "tiny_engine.py"
    script = (
        "import sys\nfrom gradcheck.cli import app\nassert 'tensorflow' not in sys.modules\n"
        "app(['run', sys.argv[1], '--no-cache', '--engine', sys.argv[2], '-f', 'json'])\n"
    )
    path = write_cases(tmp_path, 2)
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), str(tiny)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["startup_s"] > 0.1 and report["summary"]["passed"] == 2
    for case in report["cases"]:
        assert case["duration_s"] <= report["summary"]["duration_s"], (case, report["summary"])


def test_tensorflow_start_up_is_shown_and_counted_apart(tmp_path):
    """A fresh process pays TensorFlow's import once: the progress bar says so while it
    lasts (even for a run too short for a bar otherwise), and the summary and the JSON
    report count it apart from the run's own time."""
    script = textwrap.dedent(
        """
        import sys
        from rich.console import Console
        from gradcheck.cli import app, reports

        reports.stdout_console = lambda: Console(force_terminal=True, highlight=False, width=120)
        assert "tensorflow" not in sys.modules
        app(["run", sys.argv[1], "--no-cache", "--output", "report.json"])
        """
    )
    path = write_cases(tmp_path, 2)  # fewer than PROGRESS_MIN_CASES
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "starting TensorFlow" in done.stdout  # a frame of the transient bar
    summary = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout).rstrip().splitlines()[-1]
    found = re.fullmatch(r"2 passed in (\d+\.\d\d)s \(\+(\d+\.\d)s TensorFlow start-up\)", summary)
    assert found, summary
    report = json.loads((tmp_path / "report.json").read_text())["summary"]
    assert report["startup_s"] > 0.1  # importing TensorFlow takes seconds
    assert float(found[2]) == pytest.approx(report["startup_s"], abs=0.051)  # the same, rounded
    assert float(found[1]) == pytest.approx(report["duration_s"], abs=0.0051)
    assert report["duration_s"] < report["startup_s"]  # two tiny cases: the import dominates


def test_a_run_that_did_not_wait_for_tensorflow_counts_no_start_up(folder):
    from gradcheck.references import tensorflow

    tensorflow.load_tensorflow()  # imported before the run, as by an earlier one
    result = run(write_cases(folder, 2).name, "--no-cache", "--format", "json")
    assert json.loads(result.stdout)["summary"]["startup_s"] == 0.0
    assert "start-up" not in run(write_cases(folder, 2).name).stdout
