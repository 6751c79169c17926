"""gradcheck's own stderr, kept apart from the file descriptor TensorFlow's C++ side logs to.

TensorFlow's import logs to fd 2 before any setting can stop it, so it is imported with
fd 2 pointed at /dev/null (`engines.tensorflow.silenced_stderr`), on a thread of its own
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
