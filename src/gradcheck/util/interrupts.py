"""SIGINT and SIGTERM during a run: stop starting cases, write the report, exit 130 or 143.

`handled()` installs the handlers for the duration of a command. The first signal raises
`Interrupted` in the main thread, once: wherever it lands, `runner.run` turns it into a
report with the unfinished cases `not run`. A signal while the report is written
(`quiet()`) is only remembered, so the report is whole. `check()` raises for a signal
that an engine's bare ``except:`` swallowed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A signal asked the run to stop; `signal` is its name ("SIGINT", "SIGTERM")."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal = signal_name


class _State:
    received: str | None = None  # the first signal's name
    raising = False  # whether a signal raises `Interrupted` (else it is only remembered)


_state = _State()


def _handle(signum: int, frame: FrameType | None) -> None:
    first = _state.received is None
    if first:
        _state.received = signal.Signals(signum).name
    if first and _state.raising:
        raise Interrupted(_state.received)


def received() -> str | None:
    """The first signal that arrived while `handled()`, if any."""
    return _state.received


def check() -> None:
    """Raise `Interrupted` if a signal arrived that nothing has acted on yet."""
    if _state.raising and _state.received is not None:
        _state.raising = False  # once: the runner is now stopping
        raise Interrupted(_state.received)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` (once) until the block ends. Outside the main
    thread, where Python cannot set handlers, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _handle) for sig in SIGNALS}
    _state.received, _state.raising = None, True
    try:
        yield
    finally:
        _state.raising = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Signals are remembered, not raised, while the report is written."""
    raising, _state.raising = _state.raising, False
    try:
        yield
    finally:
        _state.raising = raising and _state.received is None
