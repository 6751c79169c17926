"""What an engine prints, kept for its case: bounded, whatever the engine writes.

In a worker, the process's stdout and stderr are a pipe the parent reads into a
`Capture` while it waits (`runner.workers.pool`), so writes to the file descriptors are caught
too. In gradcheck's own process (``--isolate=none``), `captured_output` catches what the
engine's thread writes through Python's `sys.stdout` and `sys.stderr`.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

CAPTURE_BYTES = 64 * 1024  # of a case's output kept: the first and the last half


class Capture:
    """A request's output as it arrives: the first and the last `limit` / 2 bytes kept."""

    def __init__(self, limit: int = CAPTURE_BYTES) -> None:
        self.half = limit // 2
        self.clear()

    def clear(self) -> None:
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail_size > self.half:  # drop the oldest bytes beyond the tail's half
            first = self.tail.popleft()
            excess = self.tail_size - self.half
            if len(first) > excess:
                self.tail.appendleft(first[excess:])
            dropped = min(len(first), excess)
            self.tail_size -= dropped
            self.dropped += dropped

    def take(self) -> str:
        gap = f"\n[... {self.dropped:,} bytes of output not kept ...]\n" if self.dropped else ""
        text = bytes(self.head).decode(errors="replace") + gap
        text += b"".join(self.tail).decode(errors="replace")
        self.clear()
        return text


class _Sink(io.TextIOBase):
    """`sys.stdout` or `sys.stderr` while an engine runs in this process: what the engine's
    thread writes is captured; other threads (TensorFlow's, warning) write through."""

    def __init__(self, capture: Capture, through: Any) -> None:
        self.capture = capture
        self.through = through
        self.thread = threading.current_thread()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if threading.current_thread() is not self.thread:
            return self.through.write(text)
        self.capture.add(str(text).encode(errors="replace"))
        return len(text)

    def flush(self) -> None:
        if threading.current_thread() is not self.thread:
            self.through.flush()


@contextlib.contextmanager
def captured_output() -> Iterator[Capture]:
    """This thread's Python-level stdout and stderr captured; `breakpoint()` restores them
    for the debugger."""
    capture = Capture()
    saved = sys.stdout, sys.stderr, sys.breakpointhook

    def debugger(*args: Any, **kwargs: Any) -> Any:
        sys.stdout, sys.stderr = saved[0], saved[1]
        return saved[2](*args, **kwargs)

    sys.stdout, sys.stderr = _Sink(capture, saved[0]), _Sink(capture, saved[1])
    sys.breakpointhook = debugger
    try:
        yield capture
    finally:
        sys.stdout, sys.stderr, sys.breakpointhook = saved
