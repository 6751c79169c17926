"""Forged and malformed cache entries (issue 22, item 4): a checksum has no secret, so an
entry may be well summed and still hostile. Every field that can change a verdict is
recomputed by `cache verify` and shown in the lock; a structurally wrong entry is corrupt,
never a traceback: under --require-cache that case is an `error` and the others run."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcheck.cases import load_file
from gradcheck.cli import app
from gradcheck.engines.driver import EngineRun
from gradcheck.references.cache import ReferenceCache
from gradcheck.references.entries import MAGIC, CorruptEntry, decode_entry, encode_entry
from gradcheck.references.lockfile import LOCK_FILE
from test_lock import CASES, DOUBLING  # the lock's two cases and its doubling engine


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.yaml").write_text(CASES)
    (tmp_path / "doubling.py").write_text(DOUBLING)
    assert invoke("run", "cases.yaml").exit_code == 0
    return tmp_path


def entry_of(project: Path, name: str = "mul_sin") -> Path:
    (case,) = [c for c in load_file(project / "cases.yaml") if c.name == name]
    path = ReferenceCache(project / ".gradcheck_cache").path(case)
    assert path is not None and path.is_file()
    return path


def reencode(path: Path, change: Callable[[EngineRun], EngineRun]) -> None:
    """The project's own encoder on a changed reference: a well-summed forgery."""
    honest = decode_entry(path.read_bytes(), path.stem)
    version = path.parent.name.removeprefix("tensorflow-")
    path.write_bytes(encode_entry(path.stem, version, change(honest)))


def summed(path: Path, header: dict, blobs: list[bytes]) -> None:
    """Any header and arrays, with a valid checksum."""
    body = json.dumps(header).encode() + b"\n" + b"".join(blobs)
    checksum = hashlib.sha256(body).hexdigest()
    path.write_bytes(MAGIC + f" 1 {checksum}\n".encode() + body)


def parts(path: Path) -> tuple[dict, list[bytes]]:
    body = path.read_bytes().split(b"\n", 1)[1]
    header_line, payload = body.split(b"\n", 1)
    header = json.loads(header_line)
    blobs, offset = [], 0
    for item in header["arrays"]:
        blobs.append(payload[offset : offset + item["size"]])
        offset += item["size"]
    return header, blobs


def saved(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def wrong_engine_run():
    return invoke(
        "run", "cases.yaml", "--engine", "doubling.py", "--isolate", "none",
        "--require-cache", "--format", "json",
    )  # fmt: skip


def without_digests(lock: str) -> str:
    return re.sub(r"sha256:[0-9a-f]{64}", "", lock)


FORGERIES = {
    "slack": lambda run: EngineRun(run.forward, run.grads, slack={n: 1e300 for n in run.grads}),
    "untrusted": lambda run: EngineRun(
        run.forward, run.grads, untrusted={n: np.ones(g.shape, bool) for n, g in run.grads.items()}
    ),
    "notes": lambda run: EngineRun(run.forward, run.grads, notes=["TensorFlow gave None: zeros"]),
}


@pytest.mark.parametrize("field", list(FORGERIES))
def test_a_forged_verdict_field_is_found_by_verify_and_shown_in_the_lock(
    project: Path, field: str
) -> None:
    assert invoke("cache", "lock", "cases.yaml").exit_code == 0
    lock = project / ".gradcheck_cache" / LOCK_FILE
    honest = lock.read_text()
    reencode(entry_of(project), FORGERIES[field])
    found = invoke("cache", "verify", "cases.yaml")
    assert found.exit_code == 1, found.output
    assert re.search(
        r"DIFFERS cases\.yaml:\d+::mul_sin: the entry differs from the lock", found.stdout
    )
    lock.unlink()  # a forger relocks: the lock's text, not only its digest, changes
    found = invoke("cache", "verify", "cases.yaml")
    assert found.exit_code == 1 and "mul_sin: the entry holds" in found.stdout
    assert "tanh_sum" not in found.stdout
    assert invoke("cache", "lock", "cases.yaml").exit_code == 0
    forged = lock.read_text()
    assert without_digests(forged) != without_digests(honest)
    shown = {"slack": "slack x 1e+300", "untrusted": "untrusted x: 12 of 12", "notes": "note "}
    assert shown[field] in forged


def test_a_forged_slack_no_longer_hides_in_a_lock_identical_to_the_honest_one(
    project: Path,
) -> None:
    """The attack of issue 22: with slack 1e300 the doubling engine passes; the relocked
    lock says so in its text, and verify names the field."""
    reencode(entry_of(project), FORGERIES["slack"])
    assert invoke("cache", "lock", "cases.yaml").exit_code == 0
    text = (project / ".gradcheck_cache" / LOCK_FILE).read_text()
    assert "slack x 1e+300" in text and "slack y 1e+300" in text
    found = invoke("cache", "verify", "cases.yaml")
    assert "holds a slack of 1e+300 for x" in found.stdout


class Marking:
    """Pickled, it runs a command when loaded: an object array must never be."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def malformed(project: Path, how: str) -> None:
    path = entry_of(project)
    header, blobs = parts(path)
    grad = next(i for i, item in enumerate(header["arrays"]) if item["name"] == "grad:x")

    def array(value: np.ndarray, dtype: str | None = None) -> None:
        blobs[grad] = saved(value)
        header["arrays"][grad].update(size=len(blobs[grad]), dtype=dtype or value.dtype.name)

    if how == "no notes":
        del header["notes"]
    elif how == "notes a number":
        header["notes"] = 3
    elif how == "slack a string":
        header["slack"] = {"x": "huge"}
    elif how == "slack infinite":
        header["slack"] = {"x": float("inf")}
    elif how == "no size":
        del header["arrays"][grad]["size"]
    elif how == "header a list":
        header = []  # type: ignore[assignment]
    elif how == "string array":
        array(np.array([["a"] * 4] * 3))
    elif how == "string array said float":
        array(np.array([["abcdefgh"] * 4] * 3, dtype="S8"), "float64")
    elif how == "complex array":
        array(np.ones((3, 4), complex))
    elif how == "structured array":
        array(np.zeros((3, 4), [("a", "<f8")]), "float64")
    elif how == "datetime array":
        array(np.zeros((3, 4), "datetime64[s]"), "float64")
    elif how == "object array":
        array(np.array([Marking(project / "marker")] * 12, object).reshape(3, 4), "float64")
    elif how == "no gradients":
        del blobs[grad]
        header["arrays"] = [i for i in header["arrays"] if i["name"] == "forward"]
        blobs = blobs[:1]
    elif how == "another gradient":
        header["arrays"][grad]["name"] = "grad:z"
    elif how == "wrong shape":
        array(np.ones((4, 3)))
    elif how == "mask not boolean":
        header["arrays"].append({"name": "untrusted:x", "dtype": "float64", "size": 0})
        blobs.append(saved(np.ones((3, 4))))
        header["arrays"][-1]["size"] = len(blobs[-1])
    summed(path, header, blobs)


MALFORMED = [
    "no notes", "notes a number", "slack a string", "slack infinite", "no size",
    "header a list", "string array", "string array said float", "complex array",
    "structured array", "datetime array", "object array", "no gradients",
    "another gradient", "wrong shape", "mask not boolean",
]  # fmt: skip


@pytest.mark.parametrize("how", MALFORMED)
def test_a_malformed_entry_is_corrupt_in_run_lock_and_verify(project: Path, how: str) -> None:
    malformed(project, how)
    result = wrong_engine_run()  # a wrong engine: a corrupt entry must not let it pass
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    status = {case["name"]: case["status"] for case in report["cases"]}
    assert status == {"mul_sin": "error", "tanh_sum": "failed"}  # the neighbour still ran
    (mul_sin,) = [case for case in report["cases"] if case["name"] == "mul_sin"]
    assert "is corrupt" in json.dumps(mul_sin)
    locked = invoke("cache", "lock", "cases.yaml")
    assert locked.exit_code == 0 and "locked 1 references" in locked.stdout
    assert re.search(
        r"not locked: cases\.yaml:\d+::mul_sin \(the tensorflow entry is corrupt", locked.stderr
    )
    verified = invoke("cache", "verify", "cases.yaml")
    assert verified.exit_code == 1 and "mul_sin: the entry is corrupt" in verified.stdout
    honest = invoke("run", "cases.yaml", "--format", "json")  # recomputed, with a warning
    assert honest.exit_code == 0 and "corrupt reference cache entry" in honest.stderr
    assert not (project / "marker").exists()


def test_an_entry_read_while_another_thread_builds_asts_is_not_called_corrupt(monkeypatch):
    """CPython 3.11/3.12 may fail ast.literal_eval (NumPy's .npy header reader) with a
    spurious SystemError while TensorFlow's import builds ASTs on its thread (gh-106905);
    once seen here as a 'corrupt' entry, an error under --require-cache. The race is
    transient: the read is retried, and any other SystemError still surfaces."""
    run = EngineRun(np.arange(3.0), {"x": np.ones(3)})
    raw = encode_entry("k", "2.21.0", run)
    real_load, failures = np.load, []

    def racing(*args, **kwargs):
        if len(failures) < 2:
            failures.append(1)
            raise SystemError("AST constructor recursion depth mismatch (before=99, after=402)")
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", racing)
    read = decode_entry(raw, "k")
    assert len(failures) == 2 and np.array_equal(read.grads["x"], run.grads["x"])

    def broken(*args, **kwargs):
        raise SystemError("something else")

    monkeypatch.setattr(np, "load", broken)
    with pytest.raises(CorruptEntry, match="something else"):
        decode_entry(raw, "k")
