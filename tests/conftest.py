"""Shared fixtures: the op registry restored after each test, and files a test keeps for
people to look at (the HTML report's screenshot), listed at the end of the run with their
paths: pytest's temporary folder keeps them for a few runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gradcheck.ops import registry, user

_KEPT: list[Path] = []


@pytest.fixture(autouse=True)
def _restore_op_registry() -> Iterator[None]:
    """User-defined ops a test declares or loads (--ops) are gone after it: the registry
    is one table per process, and later tests expect the builtin ops alone."""
    ops, loaded = dict(registry._REGISTRY), dict(user._LOADED)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(ops)
    user._LOADED.clear()
    user._LOADED.update(loaded)


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
