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
      untrusted x: 0 of 8 elements          (a numeric reference's: what else
      slack x 8.9e-09                        changes a verdict, so a forgery shows)

Only the bracketed line is read back (key, and the sha256 of the entry file); the lines
under it are for the reviewer, who sees in a diff which case's reference changed and
how. Under ``--require-cache`` an entry whose key is not in the lock, or whose bytes
differ from the locked digest, is refused (`cache.ReferenceCache`). ``gradcheck cache
verify`` recomputes entries with TensorFlow (all, or a sample) and reports those that
differ from TensorFlow (or, for the numeric reference's entries, the finite differences)
in any field (forward, gradients, masks, slack, notes), are corrupt, or differ from the
lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
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
from .entries import CorruptEntry, checked_entry, largest_entry
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
        for kind, check, path, raw in cached:
            try:
                reference = checked_entry(raw, path.stem, case, check)
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
        *_trust_lines(reference),
    ]
    return "\n  ".join(_printable(line) for line in lines) + "\n"


def _trust_lines(reference: EngineRun) -> list[str]:
    """What else in the entry changes a verdict, so that forging it changes the lock's text
    as well as its digest: the elements it cannot judge, its added atol, its notes."""
    lines = [
        f"untrusted {name}: {int(np.count_nonzero(mask))} of {mask.size} elements"
        for name, mask in reference.untrusted.items()
    ]
    lines += [f"slack {name} {value:.6g}" for name, value in reference.slack.items()]
    return lines + [f"note {note}" for note in reference.notes]


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
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)[:_LINE]


_LINE = 2000  # a note is the entry's text: a reviewer's line has a length, forged or not


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
        problem = _differs(case, check, path, raw, lock, recompute)
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
    check: str,
    path: Path,
    raw: bytes,
    lock: dict[str, str] | None,
    recompute: Callable[[], EngineRun],
) -> str | None:
    """Why the entry at `path` cannot be trusted, or None (corrupt first: the deeper fault)."""
    try:
        entry = checked_entry(raw, path.stem, case, check)
    except CorruptEntry as e:
        return f"is corrupt ({e})"
    if lock is not None:
        locked = lock.get(path.stem)
        if locked is None:
            return "is not in the lock (--require-cache would refuse it)"
        if locked != hashlib.sha256(raw).hexdigest():
            return "differs from the lock (it was changed after it was locked)"
    try:
        fresh = recompute()
    except EngineFailure as e:
        return f"cannot be recomputed: {e.message}"
    if set(entry.grads) != set(fresh.grads):
        return (
            f"holds gradients of {sorted(entry.grads)}, a fresh computation {sorted(fresh.grads)}"
        )
    arrays = [("forward", entry.forward, fresh.forward)]
    arrays += [(f"grad {n}", g, fresh.grads[n]) for n, g in entry.grads.items()]
    for what, stored, computed in arrays:
        check_ = compare(computed, stored, case.tolerance)
        if not check_.passed:
            return (
                f"holds a {what} that differs from a fresh computation (max abs diff "
                f"{check_.max_abs_diff}, {check_.mismatched}/{check_.size} elements)"
            )
    return _trust_differs(entry, fresh)


def _trust_differs(entry: EngineRun, fresh: EngineRun) -> str | None:
    """How the entry's other verdict-changing fields (masks, slack, notes) differ from a
    fresh computation's, or None: each can turn a wrong gradient green."""
    for name in entry.grads:
        stored, computed = entry.untrusted.get(name), fresh.untrusted.get(name)
        if (stored is None) != (computed is None) or (
            stored is not None and not np.array_equal(stored, computed)
        ):
            return f"holds elements of {name} it cannot judge that a fresh computation judges"
        stored_slack, fresh_slack = entry.slack.get(name, 0.0), fresh.slack.get(name, 0.0)
        if not math.isclose(stored_slack, fresh_slack, rel_tol=1e-6, abs_tol=1e-300):
            return f"holds a slack of {stored_slack:.6g} for {name}, freshly {fresh_slack:.6g}"
    if entry.notes != fresh.notes:
        return "holds notes a fresh computation does not give"
    return None
