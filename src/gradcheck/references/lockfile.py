"""The lock file's format, as `references.lock` writes it and the cache reads it back:
a header line with the format, then ``[key] sha256:<digest>`` per locked entry."""

from __future__ import annotations

import re
from pathlib import Path

from ..cases.reading import read_bounded

LOCK_FILE = "gradcheck.lock"  # in the cache's folder; see `lock`


FORMAT = 1


MAX_LOCK_BYTES = 50_000_000


_ENTRY = re.compile(r"^\[([0-9a-f]{64})\] sha256:([0-9a-f]{64})\s*$")


class LockError(Exception):
    """A lock file that is not one."""


def read_lock(path: Path) -> dict[str, str]:
    """key -> sha256 of the locked entry."""
    text = read_bounded(path, MAX_LOCK_BYTES).decode(errors="replace")
    if f"format {FORMAT}" not in text.split("\n", 1)[0]:
        raise LockError("not a gradcheck lock of this format")
    return {m[1]: m[2] for m in map(_ENTRY.match, text.splitlines()) if m}
