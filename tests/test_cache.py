"""The reference cache: hits, keys, corrupt entries, unwritable folders, --require-cache.

Everything runs real TensorFlow for the cold run; the cached runs are checked to give the
same results, and (in a fresh interpreter) to never import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcheck.references.cache as cache_module
from engines_for_tests import load_cases
from gradcheck.cases.model import Case
from gradcheck.cli import app
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.driver import EngineRun
from gradcheck.references.cache import ReferenceCache
from gradcheck.references.entries import (
    REFERENCE_VERSION,
    decode_entry,
    encode_entry,
    reference_key,
)
from gradcheck.references.tensorflow import installed_version
from gradcheck.runner import RunOptions, reference_run, run
from gradcheck.runner.shards import DURATIONS
from without_tensorflow import NO_TENSORFLOW, WRAPPER

CASES = """
    defaults:
      dtype: float64
      cotangent: random
    cases:
      - name: mul_sin
        expr: x * sin(y)
        inputs:
          x: {shape: [3, 4], init: normal}
          y: {shape: [3, 4], init: normal}
      - name: matmul_sum
        expr: sum(matmul(a, b), axis=1)
        dtype: float32
        inputs:
          a: {shape: [2, 3], init: normal}
          b: {shape: [3, 5], init: normal}
      - name: tanh_half
        expr: tanh(x) * 0.5
        dtype: float16
        inputs:
          x: {shape: [4], init: normal}
"""
ENTRY = re.compile(r"[0-9a-f]{64}\.ref")

# Runs the CLI in this fresh interpreter, then says whether TensorFlow got imported.


@pytest.fixture
def case_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(textwrap.dedent(CASES))
    return path


@pytest.fixture
def cases(tmp_path: Path) -> list[Case]:
    return load_cases(tmp_path, CASES)


def collect() -> tuple[list[str], object]:
    warnings: list[str] = []
    return warnings, warnings.append


def assert_same_reference(a, b) -> None:
    assert a.forward.dtype == b.forward.dtype
    assert np.array_equal(a.forward, b.forward, equal_nan=True)
    assert a.grads.keys() == b.grads.keys()
    for name in a.grads:
        assert a.grads[name].dtype == b.grads[name].dtype
        assert a.grads[name].shape == b.grads[name].shape
        assert np.array_equal(a.grads[name], b.grads[name], equal_nan=True)


def entries(directory: Path) -> list[Path]:
    """Every file in the cache folder but the case durations a run keeps beside the
    entries for `--shard` (tests/test_shards.py tests those)."""
    durations = directory / DURATIONS
    return sorted(p for p in directory.rglob("*") if p.is_file() and p != durations)


def statuses(result) -> list[tuple[str, str]]:
    return [(c.name, c.status) for c in result.cases]


# --- hits and misses ------------------------------------------------------------------


def test_second_run_hits_the_cache(tmp_path: Path, cases: list[Case]) -> None:
    cold = ReferenceCache(tmp_path / "c")
    first = run(cases, BuiltinEngine, RunOptions(cache=cold))
    assert (cold.hits, cold.misses, cold.stores) == (0, len(cases), len(cases))

    warm = ReferenceCache(tmp_path / "c")
    second = run(cases, BuiltinEngine, RunOptions(cache=warm))
    assert (warm.hits, warm.misses, warm.stores) == (len(cases), 0, 0)
    assert statuses(first) == statuses(second) == [(c.name, "passed") for c in cases]
    assert first.reference == second.reference == f"tensorflow {installed_version()}"
    for case in cases:
        assert_same_reference(reference_run(case), reference_run(case, RunOptions(cache=warm)))


def test_entries_live_under_the_tensorflow_version(tmp_path: Path, cases: list[Case]) -> None:
    cache = ReferenceCache(tmp_path / "c")
    run(cases, BuiltinEngine, RunOptions(cache=cache))
    folder = tmp_path / "c" / f"tensorflow-{installed_version()}"
    assert [p.name for p in entries(tmp_path / "c")] == sorted(f"{cache.key(c)}.ref" for c in cases)
    assert all(p.parent == folder for p in entries(tmp_path / "c"))


def test_bfloat16_round_trips(tmp_path: Path) -> None:
    (case,) = load_cases(
        tmp_path,
        """
        cases:
          - name: bf
            expr: x * x + 1
            dtype: bfloat16
            inputs: {x: {shape: [3], init: normal}}
        """,
    )
    cache = ReferenceCache(tmp_path / "c")
    fresh = reference_run(case, RunOptions(cache=cache))
    again = reference_run(case, RunOptions(cache=ReferenceCache(tmp_path / "c")))
    assert_same_reference(fresh, again)
    # The driver hands references over as float64; an entry keeps any dtype, even
    # ml_dtypes' bfloat16, which np.save writes as raw void bytes.
    bf16 = EngineRun(case.inputs["x"], {"x": case.cotangent}, notes=["a note"])
    decoded = decode_entry(encode_entry("k", "2.21.0", bf16), "k")
    assert decoded.forward.dtype.name == "bfloat16" and decoded.notes == ["a note"]
    assert_same_reference(bf16, decoded)


# --- the key ----------------------------------------------------------------------------


def test_key_is_deterministic(tmp_path: Path, cases: list[Case]) -> None:
    again = load_cases(tmp_path, CASES, name="again.yaml")
    assert [reference_key(c, "2.21.0") for c in cases] == [
        reference_key(c, "2.21.0") for c in again
    ]
    assert len({reference_key(c, "2.21.0") for c in cases}) == len(cases)


def test_everything_that_determines_the_reference_changes_the_key(cases: list[Case]) -> None:
    case = cases[0]
    x = case.inputs["x"].copy()
    x[0, 0] += 1e-12
    variants = {
        "input value": dataclasses.replace(case, sources={**case.inputs, "x": x}),
        "input dtype": dataclasses.replace(
            case, sources={**case.inputs, "x": case.inputs["x"].astype(np.float32)}
        ),
        "input shape": dataclasses.replace(
            case, sources={**case.inputs, "x": case.inputs["x"].reshape(4, 3)}
        ),
        "cotangent": dataclasses.replace(case, cotangent_source=case.cotangent * 2),
        "dtype": dataclasses.replace(case, dtype="float32"),
        "expr": dataclasses.replace(case, expr="x * sin(y) ", expression=case.expression),
        "wrt": dataclasses.replace(case, wrt=["x"]),
    }
    base = reference_key(case, "2.21.0")
    keys = {what: reference_key(variant, "2.21.0") for what, variant in variants.items()}
    keys["tensorflow version"] = reference_key(case, "2.20.0")
    keys["REFERENCE_VERSION"] = reference_key(
        case, "2.21.0", reference_version=REFERENCE_VERSION + 1
    )
    assert all(key != base for key in keys.values()), keys
    assert len(set(keys.values())) == len(keys)


def test_a_changed_case_misses(tmp_path: Path, cases: list[Case]) -> None:
    cache = ReferenceCache(tmp_path / "c")
    reference_run(cases[0], RunOptions(cache=cache))
    changed = dataclasses.replace(cases[0], cotangent_source=-cases[0].cotangent)
    got = reference_run(changed, RunOptions(cache=cache))
    assert (cache.hits, cache.misses) == (0, 2)
    assert_same_reference(got, reference_run(changed))


# --- corrupt entries ----------------------------------------------------------------


def truncate(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def flip_last(raw: bytes) -> bytes:
    return raw[:-1] + bytes([raw[-1] ^ 0x01])


def flip_header(raw: bytes) -> bytes:
    at = raw.index(b'"key"') + 2
    return raw[:at] + bytes([raw[at] ^ 0x20]) + raw[at + 1 :]


def flip_checksum(raw: bytes) -> bytes:
    at = raw.index(b"\n") - 1
    return raw[:at] + (b"0" if raw[at : at + 1] != b"0" else b"1") + raw[at + 1 :]


@pytest.mark.parametrize(
    "damage",
    [
        truncate,
        flip_last,
        flip_header,
        flip_checksum,
        lambda raw: b"",
        lambda raw: raw[:-3],
        lambda raw: b"not an entry at all\n" * 10,
    ],
    ids=["truncated", "bit-flip-payload", "bit-flip-header", "checksum", "empty", "tail", "junk"],
)
def test_a_damaged_entry_is_detected_and_recomputed(
    tmp_path: Path, cases: list[Case], damage
) -> None:
    run(cases, BuiltinEngine, RunOptions(cache=ReferenceCache(tmp_path / "c")))
    entry = ReferenceCache(tmp_path / "c").path(cases[0])
    entry.write_bytes(damage(entry.read_bytes()))

    warnings, warn = collect()
    cache = ReferenceCache(tmp_path / "c", warn=warn)
    result = run(cases, BuiltinEngine, RunOptions(cache=cache))
    assert statuses(result) == [(c.name, "passed") for c in cases]
    assert (cache.corrupt, cache.misses, cache.hits, cache.stores) == (1, 1, len(cases) - 1, 1)
    assert len(warnings) == 1 and "corrupt reference cache entry" in warnings[0]

    # The entry was rewritten whole, and holds TensorFlow's real numbers.
    healed = ReferenceCache(tmp_path / "c")
    assert_same_reference(
        reference_run(cases[0], RunOptions(cache=healed)), reference_run(cases[0])
    )
    assert (healed.hits, healed.corrupt) == (1, 0)


def test_an_entry_with_another_key_is_not_trusted(tmp_path: Path, cases: list[Case]) -> None:
    cache = ReferenceCache(tmp_path / "c")
    run(cases, BuiltinEngine, RunOptions(cache=cache))
    a, b = cache.path(cases[0]), cache.path(cases[1])
    a.write_bytes(b.read_bytes())  # intact, checksum fine, but another case's numbers
    warnings, warn = collect()
    again = ReferenceCache(tmp_path / "c", warn=warn)
    assert again.get(cases[0]) is None
    assert again.corrupt == 1 and len(warnings) == 1


# --- a cache that cannot be used ----------------------------------------------------


def test_cache_path_that_is_a_file_warns_once(tmp_path: Path, cases: list[Case]) -> None:
    # chmod cannot stop root, but no one can create a folder where a file is.
    blocked = tmp_path / "c"
    blocked.write_text("not a folder")
    warnings, warn = collect()
    cache = ReferenceCache(blocked, warn=warn)
    result = run(cases, BuiltinEngine, RunOptions(cache=cache))
    assert statuses(result) == [(c.name, "passed") for c in cases]
    assert len(warnings) == 1 and "cannot write the reference cache" in warnings[0]
    assert cache.stores == 0 and blocked.read_text() == "not a folder"


def test_full_disk_warns_once(tmp_path: Path, cases: list[Case], monkeypatch) -> None:
    def full(path, data) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache_module, "write_atomic", full)
    warnings, warn = collect()
    cache = ReferenceCache(tmp_path / "c", warn=warn)
    result = run(cases, BuiltinEngine, RunOptions(cache=cache))
    assert statuses(result) == [(c.name, "passed") for c in cases]
    assert len(warnings) == 1 and "No space left" in warnings[0]
    assert not (tmp_path / "c").exists()


def test_cli_unwritable_cache_one_warning_on_stderr(tmp_path: Path, case_file: Path) -> None:
    blocked = tmp_path / "c"
    blocked.write_text("")
    result = CliRunner().invoke(app, ["run", str(case_file), "-q", "--cache-dir", str(blocked)])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("gradcheck: warning:") == 1
    assert "3 passed" in result.stdout


# --- the command line ---------------------------------------------------------------


def cli(*args: str):
    return CliRunner().invoke(app, ["run", *args])


def test_cli_default_cache_dir_is_in_the_current_directory(
    tmp_path: Path, case_file: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli(str(case_file), "-q").exit_code == 0
    written = entries(tmp_path / ".gradcheck_cache")
    assert len(written) == 3 and all(ENTRY.fullmatch(p.name) for p in written)


def test_no_cache_writes_nothing(tmp_path: Path, case_file: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli(str(case_file), "-q", "--no-cache", "--cache-dir", str(tmp_path / "c"))
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "c").exists() and not (tmp_path / ".gradcheck_cache").exists()


def test_writes_leave_no_temporary_files(tmp_path: Path, case_file: Path) -> None:
    for _ in range(2):
        assert cli(str(case_file), "-q", "--cache-dir", str(tmp_path / "c")).exit_code == 0
    written = entries(tmp_path / "c")
    assert len(written) == 3 and all(ENTRY.fullmatch(p.name) for p in written)


def test_require_cache_with_a_missing_entry_is_an_error(tmp_path: Path, case_file: Path) -> None:
    cache_dir = tmp_path / "c"
    cases = load_cases(tmp_path, CASES, name="again.yaml")
    reference_run(cases[0], RunOptions(cache=ReferenceCache(cache_dir)))  # only the first

    result = cli(str(case_file), "-f", "json", "--cache-dir", str(cache_dir), "--require-cache")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [c["status"] for c in report["cases"]] == ["passed", "error", "error"]
    message = report["cases"][1]["message"]
    assert "not cached" in message and "--require-cache" in message
    assert "`gradcheck run` without --require-cache on a machine with TensorFlow" in message
    assert len(entries(cache_dir)) == 1  # nothing was computed, so nothing was written


def test_require_cache_with_an_empty_folder(tmp_path: Path, case_file: Path) -> None:
    result = cli(str(case_file), "-q", "--cache-dir", str(tmp_path / "none"), "--require-cache")
    assert result.exit_code == 1
    assert "not cached" in result.stdout
    assert not (tmp_path / "none").exists()


def test_require_cache_and_no_cache_contradict(case_file: Path) -> None:
    result = cli(str(case_file), "--no-cache", "--require-cache")
    assert result.exit_code == 2
    assert "--require-cache" in result.stderr


# --- without TensorFlow -------------------------------------------------------------


def test_a_fully_cached_run_never_imports_tensorflow(tmp_path: Path, case_file: Path) -> None:
    args = [str(case_file), "-f", "json", "--cache-dir", str(tmp_path / "c")]

    def gradcheck(*extra: str) -> tuple[dict, bool]:
        done = subprocess.run(
            [sys.executable, "-c", WRAPPER, "run", *args, *extra],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        imported = done.stderr.strip().splitlines()[-1]
        report = json.loads(done.stdout)
        for timed in [report["summary"], *report["cases"]]:
            timed.pop("duration_s")
        startups.append(report["summary"].pop("startup_s"))
        return report, imported == "tensorflow imported: True"

    startups: list[float] = []
    cold, cold_imported = gradcheck()
    cached, cached_imported = gradcheck()
    required, required_imported = gradcheck("--require-cache")
    assert cold_imported, "the check must see the import when it happens"
    assert not cached_imported and not required_imported
    assert startups[0] > 0 and startups[1:] == [0.0, 0.0]  # the start-up counted when paid
    assert cached == cold == required
    assert cold["reference"] == f"tensorflow {installed_version()}"


def test_without_tensorflow_the_newest_cached_version_is_read(
    tmp_path: Path, cases: list[Case], monkeypatch
) -> None:
    # What a CI that commits the cache sees: no TensorFlow metadata at all.
    real = ReferenceCache(tmp_path / "c")
    run(cases, BuiltinEngine, RunOptions(cache=real))
    (tmp_path / "c" / "tensorflow-2.9.1").mkdir()  # an older version's leftovers
    monkeypatch.setattr(cache_module, "installed_version", lambda: None)

    ci = ReferenceCache(tmp_path / "c")
    assert ci.installed_version is None
    assert ci.tensorflow_version == installed_version()
    result = run(cases, BuiltinEngine, RunOptions(cache=ci, require_cache=True))
    assert statuses(result) == [(c.name, "passed") for c in cases]
    assert result.reference == f"tensorflow {installed_version()}"
    assert (ci.hits, ci.misses) == (len(cases), 0)

    empty = ReferenceCache(tmp_path / "empty")
    result = run(cases[:1], BuiltinEngine, RunOptions(cache=empty, require_cache=True))
    assert result.cases[0].status == "error"
    assert "no tensorflow-* folder" in result.cases[0].message


def test_a_machine_without_tensorflow(tmp_path: Path, case_file: Path, cases) -> None:
    run(cases[:2], BuiltinEngine, RunOptions(cache=ReferenceCache(tmp_path / "c")))

    def gradcheck(*extra: str) -> tuple[int, dict]:
        args = [str(case_file), "-f", "json", "--cache-dir", str(tmp_path / "c"), *extra]
        done = subprocess.run(
            [sys.executable, "-c", NO_TENSORFLOW + WRAPPER, "run", *args],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.stderr.strip().endswith("tensorflow imported: False"), done.stderr
        return done.returncode, json.loads(done.stdout)

    code, report = gradcheck("--require-cache")
    assert code == 1
    assert report["reference"] == f"tensorflow {installed_version()}"  # the cached version
    assert [c["status"] for c in report["cases"]] == ["passed", "passed", "error"]
    assert "not cached" in report["cases"][2]["message"]

    # Without --require-cache the missing reference is still one case's error, not a crash.
    code, report = gradcheck()
    assert code == 1
    assert [c["status"] for c in report["cases"]] == ["passed", "passed", "error"]
    assert "TensorFlow is not installed" in report["cases"][2]["message"]
