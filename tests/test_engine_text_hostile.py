"""Text an engine makes (its name, its exceptions) in every report (issue 22): a lone
surrogate once crashed the rich, JSON, JUnit and GitHub reports with a traceback and no
report, control characters in the name made the JUnit XML invalid, and a 4 MB exception
took half a minute to render. Kept now as escapes, capped, and the run's report whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.dom.minidom
from pathlib import Path

import pytest

from gradcheck.engines.driver import ENGINE_TEXT_CHARS, engine_text

ENGINE = """\
from gradcheck.engines.builtin.engine import BuiltinEngine


class Engine(BuiltinEngine):
    name = "evil\\udcff\\x1b[31m\\x00\\x0bname"

    def grad(self, output, wrt, cotangent, create_graph=False):
        if any(t.name == "boom" for t in wrt):
            raise RuntimeError("lone \\udcff surrogate " + "x" * 4_000_000 + " END")
        return super().grad(output, wrt, cotangent, create_graph)
"""
CASES = """\
cases:
  - name: bad
    expr: sum(boom * 2.0)
    inputs: {boom: [1.0, 2.0]}
  - name: good
    expr: sum(x * x)
    inputs: {x: [1.0, 2.0]}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("engine_text")
    (folder / "evil.py").write_text(ENGINE)
    (folder / "cases.yaml").write_text(CASES)
    return folder


def run(folder: Path, fmt: str) -> tuple[subprocess.CompletedProcess, str]:
    out = folder / f"report.{fmt}"
    options = ["--no-cache", "--reference", "numeric", "-f", fmt, "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "gradcheck", "run", "cases.yaml", "-e", "evil.py", *options],
        cwd=folder,
        capture_output=True,
        text=True,
        errors="strict",  # what gradcheck prints is valid UTF-8
        timeout=300,
        env={**os.environ, "COLUMNS": "100"},
    )
    return done, out.read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", ["rich", "json", "junit", "github", "html"])
def test_surrogates_and_huge_messages_from_an_engine_leave_the_report_whole(
    project: Path, fmt: str
) -> None:
    done, report = run(project, fmt)
    assert done.returncode == 1, done.stderr  # an engine error, not a crash
    assert "Traceback" not in done.stderr
    assert "characters not kept" in report and " END" in report  # its head and its tail
    assert len(report) < 200_000
    if fmt == "json":
        data = json.loads(report)
        assert [c["status"] for c in data["cases"]] == ["error", "passed"]
        assert data["engine"].startswith("evil\\udcff")
    elif fmt == "junit":
        document = xml.dom.minidom.parseString(report.encode())  # valid XML
        suite = document.getElementsByTagName("testsuite")[0].getAttribute("name")
        assert suite.startswith("gradcheck[evil\\udcff") and "\x00" not in suite
    else:
        assert "\\udcff" in report
    if fmt == "rich":  # the valid neighbour still ran
        assert "PASSED  cases.yaml::good" in report


def test_engine_text_keeps_head_and_tail_and_escapes_surrogates() -> None:
    assert engine_text("a\udcffb") == "a\\udcffb"
    long = "h" * ENGINE_TEXT_CHARS + "t" * ENGINE_TEXT_CHARS
    kept = engine_text(long)
    assert kept.startswith("h" * (ENGINE_TEXT_CHARS // 2)) and kept.endswith("t" * 100)
    assert f"[... {ENGINE_TEXT_CHARS:,} characters not kept ...]" in kept
    assert engine_text("short") == "short"
