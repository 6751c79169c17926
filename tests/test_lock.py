"""Trusted references: a forged cache entry passes a wrong engine unless the lock holds it,
`gradcheck cache verify` finds it, and `--require-cache` changes nothing in the cache."""

from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcheck.cases import load_file
from gradcheck.cli import app
from gradcheck.engines.driver import EngineRun
from gradcheck.references.cache import ReferenceCache
from gradcheck.references.entries import decode_entry, encode_entry
from gradcheck.references.lockfile import LOCK_FILE, read_lock

CASES = """\
cases:
  - name: mul_sin
    expr: x * sin(y)
    inputs: {x: {shape: [3, 4]}, y: {shape: [3, 4]}}
  - name: tanh_sum
    expr: sum(tanh(x), axis=0)
    inputs: {x: {shape: [2, 3]}}
"""
DOUBLING = """\
from gradcheck.engines.builtin import BuiltinEngine


class Engine(BuiltinEngine):
    name = "doubling"

    def grad(self, output, wrt, cotangent):
        return [2 * g for g in super().grad(output, wrt, cotangent)]
"""


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env={"NO_COLOR": "1"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A folder with the cases, a wrong engine, and the cache filled by a first run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.yaml").write_text(CASES)
    (tmp_path / "doubling.py").write_text(DOUBLING)
    assert invoke("run", "cases.yaml").exit_code == 0
    return tmp_path


def entry_of(project: Path, name: str) -> Path:
    (case,) = [c for c in load_file(project / "cases.yaml") if c.name == name]
    path = ReferenceCache(project / ".gradcheck_cache").path(case)
    assert path is not None and path.is_file()
    return path


def forge(path: Path) -> None:
    """What anyone who can commit can do: the project's own encoder, doubled gradients."""
    honest = decode_entry(path.read_bytes(), path.stem)
    doubled = {name: 2 * grad for name, grad in honest.grads.items()}
    version = path.parent.name.removeprefix("tensorflow-")
    path.write_bytes(encode_entry(path.stem, version, EngineRun(honest.forward, doubled)))


def wrong_engine_run(*extra: str):
    return invoke(
        "run", "cases.yaml", "--engine", "doubling.py", "--isolate", "none", "-k", "mul_sin",
        "--require-cache", "--format", "json", *extra,
    )  # fmt: skip


def test_without_a_lock_a_forged_entry_passes_a_wrong_engine(project) -> None:
    # The threat the lock answers: the checksum has no secret.
    forge(entry_of(project, "mul_sin"))
    assert wrong_engine_run().exit_code == 0


def test_with_the_lock_a_forged_entry_is_refused(project) -> None:
    assert invoke("cache", "lock", "cases.yaml").exit_code == 0
    forge(entry_of(project, "mul_sin"))
    result = wrong_engine_run()
    assert result.exit_code == 1
    assert "differs from the one locked" in result.stdout


def test_an_entry_missing_from_the_lock_is_refused(project) -> None:
    assert invoke("cache", "lock", "cases.yaml").exit_code == 0
    lock = project / ".gradcheck_cache" / LOCK_FILE
    key = entry_of(project, "mul_sin").stem
    lock.write_text("\n".join(x for x in lock.read_text().splitlines() if key not in x))
    result = invoke("run", "cases.yaml", "-k", "mul_sin", "--require-cache")
    assert result.exit_code == 1 and "is not in the lock" in result.stdout


def test_verify_recomputes_and_names_the_forged_entry(project) -> None:
    honest = invoke("cache", "verify", "cases.yaml")
    assert honest.exit_code == 0 and "2 cached references recomputed, 0 differ" in honest.stdout
    forge(entry_of(project, "mul_sin"))
    found = invoke("cache", "verify", "cases.yaml")
    assert found.exit_code == 1
    assert re.search(
        r"DIFFERS cases\.yaml:\d+::mul_sin: the entry holds a grad x that differs", found.stdout
    )
    assert "tanh_sum" not in found.stdout


def test_verify_also_names_an_entry_changed_after_it_was_locked(project) -> None:
    invoke("cache", "lock", "cases.yaml")
    forge(entry_of(project, "tanh_sum"))
    found = invoke("cache", "verify", "cases.yaml", "--sample", "2")
    assert found.exit_code == 1 and "tanh_sum: the entry differs from the lock" in found.stdout


def test_the_lock_is_text_a_reviewer_can_read(project) -> None:
    assert invoke("cache", "lock", "cases.yaml").exit_code == 0
    text = (project / ".gradcheck_cache" / LOCK_FILE).read_text()
    assert "case cases.yaml::mul_sin" in text and "expr x * sin(y)" in text
    assert re.search(r"grad x float64 \(3, 4\): min -?\d", text)
    locked = read_lock(project / ".gradcheck_cache" / LOCK_FILE)
    assert set(locked) == {entry_of(project, n).stem for n in ("mul_sin", "tanh_sum")}
    keys = re.findall(r"^\[([0-9a-f]{64})\]", text, re.MULTILINE)
    assert keys == sorted(keys)  # a stable order: diffs show only what changed


def test_require_cache_deletes_nothing(project) -> None:
    corrupt = entry_of(project, "mul_sin")
    corrupt.write_bytes(corrupt.read_bytes()[:-10])
    other_format = entry_of(project, "tanh_sum")
    other_format.write_bytes(b"gradcheck-reference 99 abc\n{}")
    before = {p: p.read_bytes() for p in (corrupt, other_format)}
    result = invoke("run", "cases.yaml", "--require-cache")
    assert result.exit_code == 1 and result.stdout.count("ERROR") == 2
    assert {p: p.read_bytes() for p in before} == before


def test_a_fifo_in_the_cache_neither_hangs_the_run_nor_is_removed(project) -> None:
    entry = entry_of(project, "mul_sin")
    entry.unlink()
    os.mkfifo(entry)
    done: list = []
    runner = threading.Thread(target=lambda: done.append(invoke("run", "cases.yaml")))
    runner.start()
    runner.join(120)
    assert done and done[0].exit_code == 0
    assert stat.S_ISFIFO(os.stat(entry).st_mode) or entry.is_file()
