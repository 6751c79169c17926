"""Files a test keeps for people to look at (the HTML report's screenshot), listed at the
end of the run with their paths: pytest's temporary folder keeps them for a few runs."""

from __future__ import annotations

from pathlib import Path

import pytest

_KEPT: list[Path] = []


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose files are named at the end of the run."""
    return tmp_path_factory.mktemp("artifacts", numbered=False)


def keep(path: Path) -> Path:
    _KEPT.append(path)
    return path


def pytest_terminal_summary(terminalreporter) -> None:
    if _KEPT:
        terminalreporter.write_sep("-", "artifacts")
        for path in _KEPT:
            terminalreporter.write_line(str(path))
