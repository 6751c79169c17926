"""The code passes the linter and the formatter it is configured for (pyproject.toml).

Run here, so that CI, which runs only the tests, keeps `make lint` true.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src", "tests", "bench", "examples")


def ruff() -> str:
    # ruff comes with the test extras; beside the interpreter in a virtualenv.
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert found, "ruff is not installed: pip install -e '.[test]'"
    return found


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=" ".join)
def test_ruff(command: list[str]) -> None:
    result = subprocess.run([ruff(), *command, *FOLDERS], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
