"""`--output` writes what its path points to and never replaces what it must not, and
no report can be turned against its reader: control characters are escaped and no line
starts a GitHub Actions workflow command, in every format."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcheck.cli import app
from gradcheck.util.atomic import STALE_S, write_atomic

CASES = """\
cases:
  - name: ok
    expr: sum(x * y)
    inputs: {x: [1.0, 2.0], y: [3.0, 4.0]}
"""
ENV = {"NO_COLOR": "1", "COLUMNS": "80"}


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.fixture
def cases(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "cases.yaml"
    path.write_text(CASES)
    return path


def run_to(cases: Path, output: str | Path, fmt: str = "json"):
    return invoke("run", str(cases), "--format", fmt, "--output", str(output), "--no-cache")


def test_a_symlinked_report_is_written_through_not_replaced(cases, tmp_path) -> None:
    target = tmp_path / "reports" / "real.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert run_to(cases, link).exit_code == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["summary"]["passed"] == 1


def test_a_fifo_is_written_into_and_stays_a_fifo(cases, tmp_path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    result = run_to(cases, fifo)
    reader.join(30)
    assert result.exit_code == 0
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert json.loads(received[0])["summary"]["passed"] == 1


def test_dev_null_stays_a_device(cases) -> None:
    before = os.stat("/dev/null")
    assert run_to(cases, "/dev/null").exit_code == 0
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


@pytest.mark.parametrize("where", ["folder", "under-a-file", "full-device"])
def test_a_report_that_cannot_be_written_is_exit_2_after_the_terminal_report(
    cases, tmp_path, where
) -> None:
    (tmp_path / "afile").write_text("")
    output = {"folder": tmp_path, "under-a-file": tmp_path / "afile" / "r.json"}.get(
        where, Path("/dev/full")
    )
    if where == "full-device" and not os.path.exists("/dev/full"):
        pytest.skip("this system has no /dev/full")  # Linux has it; the CI runs Linux
    result = run_to(cases, output)
    assert result.exit_code == 2
    assert "1 passed" in result.stdout  # the terminal still got its report
    assert result.stderr.startswith(f"gradcheck: error: cannot write the report to {output}")
    assert "Traceback" not in result.stderr


def test_stale_temporary_files_are_swept_and_fresh_ones_kept(tmp_path) -> None:
    target = tmp_path / "report.json"
    stale, fresh = tmp_path / ".report.json.abc.tmp", tmp_path / ".report.json.def.tmp"
    for path in (stale, fresh):
        path.write_text("half a report")
    old = time.time() - STALE_S - 60
    os.utime(stale, (old, old))
    write_atomic(target, "{}")
    assert target.read_text() == "{}"
    assert not stale.exists() and fresh.exists()


# -- escaping --------------------------------------------------------------------------

# YAML's double quotes make \\e an ESC, \\a a BEL, \\u202e a right-to-left override.
HOSTILE_TEXT = """\
cases:
  - name: sneaky
    description: "\\e]0;pwned\\a"
    expr: "x * 2.0  # \\e[2J\\e[31mred\\u202e {padding} ::warning::pwned"
    inputs: {{x: [1.0, 2.0]}}
    expect: {{x: [5.0, 5.0]}}
"""
PADDING = "a" * 40


@pytest.mark.parametrize("fmt", ["rich", "json", "junit", "github", "plain", "html"])
def test_no_format_passes_control_characters_or_workflow_commands_on(tmp_path, fmt) -> None:
    path = tmp_path / "sneaky.yaml"
    path.write_text(HOSTILE_TEXT.format(padding=PADDING))
    args = ["run", str(path), "--no-cache"]
    if fmt == "plain":  # the plain report --output writes for --format rich
        result = invoke(*args, "--output", str(tmp_path / "report.txt"))
        text = (tmp_path / "report.txt").read_text()
    else:
        result = invoke(*args, "--format", fmt)
        text = result.stdout
    assert result.exit_code == 1
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", text), repr(text)
    commands = [line for line in text.splitlines() if line.lstrip().startswith("::")]
    assert all(line.startswith("::error file=") for line in commands), commands
    if fmt == "json":
        assert "\x1b" in json.loads(text)["cases"][0]["expr"]  # the value itself is kept
    if fmt == "junit":
        ET.fromstring(text)
    if fmt in ("rich", "plain"):
        assert "\\x1b[2J" in text  # shown, not obeyed


def test_a_comment_wrapped_onto_a_line_of_its_own_cannot_start_a_command(tmp_path) -> None:
    path = tmp_path / "sneaky.yaml"
    guarded = 0
    for width in range(30, 80):  # one of these puts `::warning::` at the start of a line
        path.write_text(HOSTILE_TEXT.format(padding="a" * width))
        lines = invoke("run", str(path), "--no-cache").stdout.splitlines()
        assert not any(line.lstrip().startswith("::") for line in lines)
        guarded += any(line.lstrip().startswith(":\u200b:warning::") for line in lines)
    assert guarded
