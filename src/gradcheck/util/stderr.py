"""gradcheck's own stderr, kept apart from the file descriptor TensorFlow's C++ side logs to.

TensorFlow's import logs to fd 2 before any setting can stop it, so it is imported with
fd 2 pointed at /dev/null (`silenced_stderr`), on a thread of its own
that starts with the run. Meanwhile gradcheck's messages must still be seen.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def python_stderr_kept() -> Iterator[None]:
    """Python's writes to stderr (gradcheck's messages, tracebacks) reach the terminal even
    while another thread has fd 2 pointed at /dev/null for TensorFlow's import: for the
    duration, `sys.stderr` writes to a duplicate of fd 2. Nothing changes when `sys.stderr`
    is not fd 2's stream (a test runner's capture)."""
    try:
        own = sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        own = False
    if not own:
        yield
        return
    saved = sys.stderr
    saved.flush()
    encoding, errors = saved.encoding, saved.errors or "backslashreplace"
    with open(os.dup(2), "w", encoding=encoding, errors=errors, buffering=1) as duplicate:
        sys.stderr = duplicate
        try:
            yield
        finally:
            sys.stderr = saved


@contextlib.contextmanager
def silenced_stderr() -> Iterator[None]:
    """Point fd 2 at /dev/null: absl logs from C++ before any Python setting applies."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def quiet_import() -> Iterator[None]:
    """Around any import that may bring TensorFlow in: ours, or an engine adapter's."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # C++ INFO/WARNING lines at import
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # its banner, and bit-for-bit repeatability
    with silenced_stderr():
        yield
