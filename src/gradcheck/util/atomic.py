"""Writing files that others read: atomically where that is safe, never replacing what must stay.

`write_atomic` (cache entries, reports into regular files): a temporary file beside the
target, renamed over it, so a reader sees the old file or the new one, never half of
one. A temporary file is removed if the write fails or is interrupted (SIGINT, SIGTERM);
one left by a killed process is swept by a later write once it is `STALE_S` old.

`write_report` (``--output``): follows symlinks and writes what they point to; a target
that is not a regular file (a device such as /dev/null, a FIFO, /dev/stdout) is opened
and written, never replaced by a file of its own; a FIFO nobody reads is refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import stat
import tempfile
import time
from pathlib import Path

STALE_S = 3600.0  # a temporary file this old belongs to no write still going on
_SPECIAL = ("/dev/", "/proc/")  # where a path names an open file or a device, never a file


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    sweep_stale(target.parent, f".{target.name}.")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide CI artifacts
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sweep_stale(directory: Path, prefix: str = ".") -> None:
    """Remove `write_atomic`'s temporary files in `directory` left by killed processes."""
    cutoff = time.time() - STALE_S
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            if entry.name.startswith(prefix) and entry.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)


def write_report(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write `data` where `path` points; `OSError` saying why when it cannot be written."""
    raw = data.encode() if isinstance(data, str) else data
    if not os.fspath(path):
        raise FileNotFoundError(2, "no file name given")
    real = os.path.realpath(path)
    try:
        mode = os.stat(path).st_mode  # through every symlink, /proc's magic ones included
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "is a folder")
    special = os.path.abspath(path).startswith(_SPECIAL) or real.startswith(_SPECIAL)
    if special or (mode is not None and not stat.S_ISREG(mode)):
        # Append, not truncate: /dev/stdout may be the file a shell redirected stdout to.
        # Opened without blocking: a FIFO no process reads is refused at once (ENXIO),
        # where a blocking open would wait forever, deaf to SIGINT and SIGTERM.
        flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0)
        try:
            fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
        except OSError as e:
            if e.errno == errno.ENXIO and mode is not None and stat.S_ISFIFO(mode):
                raise OSError(e.errno, "a FIFO that no process is reading") from None
            raise
        try:
            _write_paced(fd, raw)
        finally:
            os.close(fd)
        return
    write_atomic(real, raw)


WAIT_S = 0.25  # between looks for a signal while a reader is slow to read


def _write_paced(fd: int, raw: bytes) -> None:
    """All of `raw` into the non-blocking `fd`, at its reader's pace; a SIGINT or SIGTERM
    (remembered, not raised, while reports are written) stops it within `WAIT_S`: a
    reader that never reads would otherwise hold the run forever."""
    from .interrupts import received

    view = memoryview(raw)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        select.select([], [fd], [], WAIT_S)
        if received() is not None:
            raise InterruptedError(errno.EINTR, f"stopped by {received()}, not all written")
