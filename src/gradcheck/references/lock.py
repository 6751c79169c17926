"""Trusted references: the lock a reviewer reads, and `verify`, which recomputes entries.

A reference cache is as trusted as the repository holding it: its entries are binary,
and their checksums have no secret, so anyone who can commit can forge one that makes a
wrong engine pass. The lock (``<cache dir>/gradcheck.lock``, written by
``gradcheck cache lock``) is text, one entry per cached reference, sorted by key::

    [3f2a...e1] sha256:9c0d...77
      tensorflow 2.21.0
      case cases/seed.yaml::seed_batched_matmul_chain
      expr matmul(matmul(x, y), z)
      forward float32 (2, 2, 2): min -1.23, max 4.56, mean 0.789
      grad x float32 (2, 2, 2): min ..., max ..., mean ...

Only the bracketed line is read back (key, and the sha256 of the entry file); the lines
under it are for the reviewer, who sees in a diff which case's reference changed and
how. Under ``--require-cache`` an entry whose key is not in the lock, or whose bytes
differ from the locked digest, is refused (`cache.ReferenceCache`). ``gradcheck cache
verify`` recomputes entries with TensorFlow (all, or a sample) and reports those that
differ from TensorFlow (or, for the numeric reference's entries, the finite differences)
or from the lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..cases.model import Case
from ..cases.reading import read_bounded
from ..comparison.compare import compare
from ..engines.driver import EngineFailure, EngineRun
from ..util.atomic import write_atomic
from .cache import ReferenceCache
from .computed import computed_reference
from .entries import CorruptEntry, decode_entry, largest_entry
from .lockfile import FORMAT, LOCK_FILE, LockError, read_lock

_HEADER = f"""\
# gradcheck reference lock, format {FORMAT}: the cached references
# `gradcheck run --require-cache` may use. Written by `gradcheck cache lock`; review a
# change to it as you review code. Each entry: [key] sha256 of the entry file, then (for
# the reviewer, not read back) the case it was computed for and a summary of its values.
"""


@dataclass
class Locked:
    """What `write_lock` did: the cases locked, and those it could not lock, with why."""

    path: Path
    locked: list[Case] = field(default_factory=list)
    missing: list[tuple[Case, str]] = field(default_factory=list)


KINDS = ("tensorflow", "numeric")  # the kinds of reference a cache holds entries of
CHECKS = ("vjp", "jvp", "hvp")  # gradients, JVPs, second order: an entry of its own each


def _cached_entries(case: Case, cache: ReferenceCache) -> list[tuple[str, str, Path, bytes]]:
    """(kind, check, path, bytes) of each entry `cache` holds for `case`: its gradients'
    (check ``vjp``), and its JVPs' and second order's where it was checked so."""
    found = []
    for kind in KINDS:
        for check in CHECKS:
            path = cache.path(case, kind, check)
            if path is not None:
                with contextlib.suppress(OSError):
                    found.append((kind, check, path, read_bounded(path, largest_entry(case))))
    return found


def write_lock(cases: Sequence[Case], cache: ReferenceCache) -> Locked:
    """Lock the valid entries `cache` holds for `cases` (replacing the lock file)."""
    done = Locked(cache.directory / LOCK_FILE)
    entries: dict[str, str] = {}
    for case in cases:
        cached = _cached_entries(case, cache)
        if not cached:
            done.missing.append((case, "not cached"))
        for kind, _, path, raw in cached:
            try:
                reference = decode_entry(raw, path.stem)
            except CorruptEntry as e:
                done.missing.append((case, f"the {kind} entry is corrupt: {e}"))
                continue
            by = f"{kind} {'numpy ' if kind == 'numeric' else ''}{cache.version(kind)}"
            entries[path.stem] = _entry(path.stem, raw, case, reference, by)
        if any(path.stem in entries for _, _, path, _ in cached):
            done.locked.append(case)
    text = _HEADER + "".join(f"\n{entries[key]}" for key in sorted(entries))
    write_atomic(done.path, text)
    return done


def _entry(key: str, raw: bytes, case: Case, reference: EngineRun, computed_by: str) -> str:
    lines = [
        f"[{key}] sha256:{hashlib.sha256(raw).hexdigest()}",
        computed_by,
        f"case {case.file}::{case.name}",
        *(f"expr {line}" for line in case.expr.splitlines()),
        f"forward {summary(reference.forward)}",
        *(f"grad {name} {summary(grad)}" for name, grad in reference.grads.items()),
    ]
    return "\n  ".join(_printable(line) for line in lines) + "\n"


def summary(array: np.ndarray) -> str:
    """`float32 (2, 3): min -1, max 2.5, mean 0.25`, and how many values are not finite."""
    values = np.asarray(array, dtype=np.float64)
    finite = values[np.isfinite(values)]
    text = f"{np.asarray(array).dtype} {tuple(values.shape)}"
    if finite.size:
        text += f": min {finite.min():.6g}, max {finite.max():.6g}, mean {finite.mean():.6g}"
    if finite.size < values.size:
        text += f", {values.size - finite.size} not finite"
    return text


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


# -- verify ----------------------------------------------------------------------------


@dataclass
class Verified:
    """What `verify` found: the entries checked, those that differ (with how), the rest."""

    checked: list[Case] = field(default_factory=list)
    differ: list[tuple[Case, str]] = field(default_factory=list)
    not_cached: list[Case] = field(default_factory=list)


def verify(
    cases: Sequence[Case], cache: ReferenceCache, *, sample: int | None = None, seed: int = 0
) -> Verified:
    """Recompute the entries `cache` holds for `cases` (or `sample` of them, drawn with
    `seed`) with what computed them (TensorFlow, or the finite differences), and compare;
    nothing in the cache is changed."""
    found = Verified()
    lock = _lock_or_none(cache)
    cached: list[tuple[Case, str, str, Path, bytes]] = []
    for case in cases:
        entries = _cached_entries(case, cache)
        cached += [(case, *entry) for entry in entries]
        if not entries:
            found.not_cached.append(case)
    if sample is not None and sample < len(cached):
        cached = random.Random(seed).sample(cached, sample)
    for case, kind, check, path, raw in cached:
        found.checked.append(case)
        recompute = lambda c=case, k=kind, x=check: computed_reference(c, k, x)
        problem = _differs(case, path, raw, lock, recompute)
        if problem:
            found.differ.append((case, problem))
        case.release()
    return found


def _lock_or_none(cache: ReferenceCache) -> dict[str, str] | None:
    try:
        return read_lock(cache.directory / LOCK_FILE)
    except (OSError, LockError):
        return None


def _differs(
    case: Case,
    path: Path,
    raw: bytes,
    lock: dict[str, str] | None,
    recompute: Callable[[], EngineRun],
) -> str | None:
    """Why the entry at `path` cannot be trusted, or None."""
    if lock is not None:
        locked = lock.get(path.stem)
        if locked is None:
            return "is not in the lock (--require-cache would refuse it)"
        if locked != hashlib.sha256(raw).hexdigest():
            return "differs from the lock (it was changed after it was locked)"
    try:
        entry = decode_entry(raw, path.stem)
    except CorruptEntry as e:
        return f"is corrupt ({e})"
    try:
        fresh = recompute()
    except EngineFailure as e:
        return f"cannot be recomputed: {e.message}"
    arrays = [("forward", entry.forward, fresh.forward)]
    arrays += [(f"grad {n}", g, fresh.grads.get(n)) for n, g in entry.grads.items()]
    for what, stored, computed in arrays:
        if computed is None:
            return f"holds {what}, which TensorFlow does not give"
        check = compare(computed, stored, case.tolerance)
        if not check.passed:
            return (
                f"holds a {what} that differs from a fresh computation (max abs diff "
                f"{check.max_abs_diff}, {check.mismatched}/{check.size} elements)"
            )
    return None
