"""The command line (SPEC §5).

Exit codes: 0 every case passed or was skipped (every case skipped: the summary says
nothing was checked); 1 a gradient or forward mismatch, or an engine error; 2 a usage
error (a malformed `-k` included), an invalid case file (after every problem is
reported) or a report that cannot be written (after the terminal report); 5 no case was
selected or found (the summary, or stderr beside a JSON or JUnit report, says why); 130
or 143 a run stopped by SIGINT or SIGTERM (after the report of what it checked).
Reports go to stdout, problems with the command line to stderr. TensorFlow is imported
only by `run`, in the background from its start, and only when a case may need a
reference the cache (`--cache-dir`, default `.gradcheck_cache/`) does not hold; under
`--require-cache` such a case is an error (exit 1). `fuzz` (SPEC §10): 1 when it found
a bug, 0 when none in its budget, 2 a usage error.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

# Each registers its commands, in the order --help lists them. They do without `from
# __future__ import annotations`: typer reads every command's annotations on each start,
# and as strings each would be compiled anew (~0.015 s a start).
from . import run, check, cases, ops, fuzz, merge  # noqa: F401  # isort: skip
from .cache import cache_app
from .common import app
from .run import bare_diagnose

__all__ = ["app", "bare_diagnose", "main"]

app.add_typer(cache_app, name="cache")


def main() -> None:
    """Console-script entry point."""
    from ..util.stderr import python_stderr_kept

    try:
        with python_stderr_kept():  # messages reach stderr while TensorFlow imports
            app()
    except SystemExit as done:
        _exit(done.code)
    _exit(0)


def _exit(code: object) -> None:
    """Exit with `code`, even when an engine running in this process left a thread behind
    (which would keep the interpreter from ever exiting)."""
    lingering = [
        t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon
    ]
    if not lingering:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
