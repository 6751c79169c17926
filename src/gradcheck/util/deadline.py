"""A time limit on Python code that may never return (an engine's looping VJP).

`interrupted_after(seconds)` raises `TimedOut` in the running code once the time is up,
from a SIGALRM timer: the exception's traceback ends on the line the code was at, which
is what the diagnosis names (SPEC §6.1 `hangs`). A signal reaches the main thread only,
and only between Python bytecodes: elsewhere (another thread, a platform without
`setitimer`) the limit is not set, and a loop inside C code runs on to the worker's own
deadline, where the worker is killed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class TimedOut(Exception):
    """Raised into code that ran past its limit. An Exception, so that the engine call
    it interrupts fails as an engine error with its traceback (`call_engine`)."""


def can_interrupt() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def interrupted_after(seconds: float | None) -> Iterator[None]:
    """`TimedOut` in the code run inside, after `seconds` (None or 0: no limit)."""
    if not seconds or seconds <= 0 or not can_interrupt():
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise TimedOut(f"did not return within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def before(deadline: float) -> float:
    """The limit to set on a step that its parent stops at `deadline` seconds: early
    enough to reply with where it was interrupted before the parent kills it."""
    return deadline - min(1.0, 0.2 * deadline)


def timed_out(deadline: float, what: str | None) -> str:
    """How a step that ran past `deadline` seconds is reported, as a killed worker's is."""
    return f"timed out after {deadline:g} s" + (f" in {what}()" if what else "")


def is_timed_out(message: str) -> bool:
    return message.startswith("timed out after ")
