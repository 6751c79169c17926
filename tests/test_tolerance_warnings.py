"""A tolerance too wide to judge anything is warned about in the report (issue 22):
`atol: 1e300` or `rtol: 1` made any engine pass, without a word."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcheck.cli import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
CASES = """\
cases:
  - name: wide_atol
    expr: sum(x * x)
    inputs: {x: [1.0, 2.0]}
    tolerance: {atol: 1e300}
  - name: wide_rtol
    expr: sum(x * x)
    inputs: {x: [1.0, 2.0]}
    tolerance: {rtol: 1}
  - name: plain
    expr: sum(x * x)
    inputs: {x: [1.0, 2.0]}
    tolerance: {rtol: 0.5, atol: 3.0}
"""


@pytest.fixture(autouse=True)
def _in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.yaml").write_text(CASES)


def run(*args: str):
    return CliRunner().invoke(
        app, ["run", "cases.yaml", "--reference", "numeric", "--no-cache", *args], env=ENV
    )


def test_a_loose_tolerance_is_warned_about_in_every_report() -> None:
    rich = run()
    assert rich.exit_code == 0, rich.output
    text = " ".join(rich.stdout.split())
    assert "PASSED cases.yaml::wide_atol" in text
    assert "warning: atol 1e+300 is larger than every reference value (at most 5)" in text
    assert "warning: rtol 1 is over 0.5: a gradient off by half still passes" in text
    assert text.count("warning:") == 2  # the sane neighbour says nothing
    cases = {c["name"]: c for c in json.loads(run("-f", "json").stdout)["cases"]}
    assert cases["wide_atol"]["message"].startswith("warning: atol 1e+300")
    assert cases["wide_rtol"]["message"].startswith("warning: rtol 1 ")
    assert cases["plain"]["message"] == ""


def test_a_command_line_tolerance_is_warned_about_too() -> None:
    result = run("--rtol", "2", "-k", "plain")
    assert result.exit_code == 0, result.output
    assert "warning: rtol 2 is over 0.5" in " ".join(result.stdout.split())
