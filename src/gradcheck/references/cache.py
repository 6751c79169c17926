"""The reference cache: references kept between runs, so a re-run skips TensorFlow.

A reference (the forward value and the gradients TensorFlow gives for one case) is
stored under a key that hashes everything that determines it: the expression's source
and the ops it resolves to (name, TensorFlow mapping, attributes with defaults filled
in), the resolved inputs (name, dtype, shape, bytes), `wrt`, the dtype, the cotangent,
TensorFlow's version, `TF_ENABLE_ONEDNN_OPTS` and `REFERENCE_VERSION`, and the kind of
reference (``tensorflow`` or ``numeric``, the finite differences of `references.numeric`, whose
entries are keyed by NumPy's version instead of TensorFlow's, and keep which elements they
cannot judge). A user-defined op also keys on the contents of the file declaring it.
Forward mode's JVPs and second order's gradients are entries of their own, keyed also by
the check and the tangents (or directions v) they were computed along.
Change any of them and the key changes, so a stale entry is never read; it is simply
never hit again.

Layout: ``<cache dir>/tensorflow-<version>/<key>.ref`` (``numeric-<NumPy version>/`` for
the numeric reference), one file per reference.
TensorFlow's version comes from its package metadata (`installed_version`), never
from importing it: a run whose references are all cached does not import TensorFlow.
Where TensorFlow is not installed at all (a CI that commits the cache), the cache
reads the newest ``tensorflow-<version>`` folder it holds.

An entry is ``gradcheck-reference <format> <sha256>\\n`` followed by a body: a one-line
JSON header (key, versions, array names, dtypes and sizes, notes) and the arrays, each
as `np.save` bytes, back to back. The sha256 covers the whole body, so a truncated or
bit-flipped entry is detected, deleted and recomputed, never trusted; arrays are
loaded with ``allow_pickle=False``. Entries are written with `write_atomic`, so an
interrupted run leaves the old entry or the new one, never half of one.

The cache never fails a run: an unreadable, unwritable, full or corrupt cache falls back
to computing references, with one warning (to stderr) per run. Only references are
cached, never failures: a case TensorFlow cannot compute is recomputed every run.

When gradcheck's reference code changes in a way that changes results (the
TensorFlow engine, the driver, an op's TensorFlow builder), bump `REFERENCE_VERSION`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

import numpy as np

from ..cases.model import Case
from ..cases.reading import read_bounded
from ..engines.driver import EngineFailure, EngineRun
from ..util.atomic import sweep_stale, write_atomic
from .entries import CorruptEntry, checked_entry, encode_entry, largest_entry, reference_key
from .lockfile import LOCK_FILE, LockError, read_lock
from .tensorflow import installed_version

DEFAULT_DIR = ".gradcheck_cache"
SUFFIX = ".ref"
FILL_HINT = "run `gradcheck run` without --require-cache on a machine with TensorFlow to fill it"


class ReferenceNotCached(EngineFailure):
    """`--require-cache`: the case's reference is missing and may not be computed."""


def _newest_version(directory: Path) -> str | None:
    """The newest TensorFlow version the cache holds entries for (TensorFlow not installed)."""
    try:
        names = [p.name for p in directory.iterdir() if p.is_dir()]
    except OSError:
        return None
    versions = [n.removeprefix("tensorflow-") for n in names if n.startswith("tensorflow-")]
    return max(versions, key=lambda v: (tuple(map(int, re.findall(r"\d+", v))), v), default=None)


def _print_warning(message: str) -> None:
    print(f"gradcheck: warning: {message}", file=sys.stderr, flush=True)


class ReferenceCache:
    """References on disk under `directory`; one object per run. Each method takes the
    reference's `kind`: ``tensorflow`` (the default) or ``numeric``.

    `get` and `put` never raise for a cache problem: the first one is reported through
    `warn` (by default a line on stderr), later ones silently, and the reference is
    computed instead. `hits`, `misses`, `stores` and `corrupt` count what happened.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] = DEFAULT_DIR,
        *,
        tensorflow_version: str | None = None,
        warn: Callable[[str], None] = _print_warning,
        read_only: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self._given_version = tensorflow_version
        self._warn = warn
        self.warned = False
        self.read_only = read_only
        self.writable = not read_only
        self.swept = False
        self.hits = self.misses = self.stores = self.corrupt = 0

    @cached_property
    def lock(self) -> dict[str, str] | None:
        """The lock's key -> entry digest, when `read_only` and the lock file exists."""
        if not self.read_only:
            return None

        try:
            return read_lock(self.directory / LOCK_FILE)
        except FileNotFoundError:
            self.warn(
                f"no lock ({self.directory / LOCK_FILE}): the cached references are used "
                "as they are; `gradcheck cache lock` writes one for review"
            )
            return None
        except (OSError, LockError) as e:
            self.warn(f"cannot read the lock {self.directory / LOCK_FILE} ({e}); it locks nothing")
            return {}

    @cached_property
    def installed_version(self) -> str | None:
        """The TensorFlow that would compute a missing reference (None: not installed)."""
        return self._given_version or installed_version()

    @cached_property
    def tensorflow_version(self) -> str | None:
        """The version entries are read for: the installed one, else the newest cached."""
        return self.installed_version or _newest_version(self.directory)

    def version(self, kind: str = "tensorflow") -> str | None:
        """What the `kind` reference's entries are computed by: TensorFlow's or NumPy's version."""
        return self.tensorflow_version if kind == "tensorflow" else np.__version__

    def folder(self, kind: str = "tensorflow") -> Path:
        version = self.version(kind) or "unknown"
        return self.directory / f"{kind}-{version.replace(os.sep, '_')}"

    def key(self, case: Case, kind: str = "tensorflow", check: str = "vjp") -> str | None:
        version = self.version(kind)
        return reference_key(case, version, kind=kind, check=check) if version else None

    def path(self, case: Case, kind: str = "tensorflow", check: str = "vjp") -> Path | None:
        key = self.key(case, kind, check)
        return self.folder(kind) / f"{key}{SUFFIX}" if key else None

    def get(self, case: Case, kind: str = "tensorflow", check: str = "vjp") -> EngineRun | None:
        """The cached reference of `case` for `check`, or None (a miss) after counting why."""
        run = self._read(case, kind, check)
        if run is None:
            self.misses += 1
        else:
            self.hits += 1
        return run

    def _read(self, case: Case, kind: str, check: str) -> EngineRun | None:
        path = self.path(case, kind, check)
        if path is None:
            return None
        try:
            raw = read_bounded(path, largest_entry(case))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            self.warn(f"cannot read the reference cache entry {path} ({e}); computing it instead")
            return None
        if self.lock is not None:
            self._check_locked(path, raw)
        try:
            return checked_entry(raw, path.stem, case, check)
        except CorruptEntry as e:
            self.corrupt += 1
            if self.read_only:  # nothing may be recomputed: that case is an error
                raise ReferenceNotCached(
                    f"the cached reference {path} is corrupt ({e}), so --require-cache "
                    f"refuses it; {FILL_HINT}"
                ) from None
            self.warn(f"corrupt reference cache entry {path} ({e}); recomputing it")
            with contextlib.suppress(OSError):  # `put` replaces it anyway
                path.unlink()
            return None

    def _check_locked(self, path: Path, raw: bytes) -> None:
        """`ReferenceNotCached` unless the lock lists this entry, exactly as it is."""
        assert self.lock is not None
        lock = self.directory / LOCK_FILE
        locked = self.lock.get(path.stem)
        if locked is None:
            raise ReferenceNotCached(
                f"the cached reference {path} is not in the lock {lock}, so --require-cache "
                "refuses it; review the entry (`gradcheck cache verify`) and run "
                "`gradcheck cache lock`"
            )
        if hashlib.sha256(raw).hexdigest() != locked:
            raise ReferenceNotCached(
                f"the cached reference {path} differs from the one locked in {lock}: it was "
                "changed after it was locked, so --require-cache refuses it; "
                "`gradcheck cache verify` recomputes it with TensorFlow"
            )

    def put(self, case: Case, run: EngineRun, kind: str = "tensorflow", check: str = "vjp") -> None:
        """Store a reference just computed (by the installed TensorFlow, for that kind)."""
        version = self.installed_version if kind == "tensorflow" else self.version(kind)
        if not self.writable or version is None or version != self.version(kind):
            return
        path = self.path(case, kind, check)
        if path is None:
            return
        if not self.swept:  # temporary files that killed runs left behind
            self.swept = True
            sweep_stale(path.parent)
        try:
            write_atomic(path, encode_entry(path.stem, version, run))
        except Exception as e:  # full, read-only, not a directory: the run goes on uncached
            self.writable = False
            self.warn(
                f"cannot write the reference cache in {self.directory} ({e}); "
                "references will be computed again next run"
            )
            return
        self.stores += 1

    def warn(self, message: str) -> None:
        if not self.warned:
            self.warned = True
            self._warn(message)

    def not_cached_message(self, case: Case, kind: str = "tensorflow") -> str:
        version = self.version(kind)
        where = f"{self.folder(kind)}" if version else f"{self.directory} (no {kind}-* folder)"
        return (
            f"the reference is not cached in {where} and --require-cache forbids "
            f"computing it; {FILL_HINT}"
        )
