"""Messages between gradcheck and its worker processes, framed over pipes.

A frame is a header (the payload's length, the number of out-of-band buffers and their
lengths), the payload and the buffers: arrays travel out of band, written from and read
into array memory, with no copy in between. `Receiver` reads frames incrementally from
a non-blocking pipe, so the parent can wait for a reply, a timeout and the worker's
output at once; the worker reads its requests blocking.

Requests (gradcheck to its worker, trusted) are pickles. Replies are not: a worker runs
the engine, so what it sends is untrusted, and is plain data (`runner.workers.replies`:
MessagePack and arrays of allowed dtypes, read against the messages' schema). A frame's
sizes are bounded before anything is allocated for it.
"""

from __future__ import annotations

import os
import pickle
import struct
from collections.abc import Callable
from typing import Any

_HEADER = struct.Struct("<QI")  # payload length, number of buffers
_LENGTH = struct.Struct("<Q")
# What one reply may claim: far more than any case's arrays (`util.limits`) take.
MAX_BUFFERS = 4096
MAX_FRAME_BYTES = 1 << 30


class BadFrame(ValueError):
    """A frame whose sizes are out of bounds."""


def _frame(payload: bytes, buffers: list[memoryview]) -> list[memoryview]:
    header = _HEADER.pack(len(payload), len(buffers)) + b"".join(
        _LENGTH.pack(b.nbytes) for b in buffers
    )
    return [memoryview(header), memoryview(payload), *(b for b in buffers if b.nbytes)]


def encode(message: Any) -> list[memoryview]:
    """A request as the memory of one frame, in order (buffers still the arrays' own)."""
    buffers: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    return _frame(payload, [b.raw() for b in buffers])


def encode_reply(message: Any) -> list[memoryview]:
    """A worker's reply as the memory of one frame; `TypeError` for what is no reply."""
    from .replies import pack

    return _frame(*pack(message))


def unpickle(payload: bytearray, buffers: list[bytearray]) -> Any:
    """A request, as the worker reads it."""
    return pickle.loads(payload, buffers=buffers)


def read_reply(payload: bytearray, buffers: list[bytearray]) -> Any:
    """A reply, as gradcheck reads it: plain data or `replies.BadReply`."""
    from .replies import unpack

    return unpack(payload, buffers)


def send(fd: int, parts: list[memoryview]) -> None:
    """Write an encoded message to the blocking pipe `fd`."""
    while parts:
        write_some(fd, parts)


def write_some(fd: int, parts: list[memoryview]) -> None:
    """Write as much of `parts` as `fd` takes in one call, dropping what was written."""
    written = os.writev(fd, parts)
    while parts and written >= len(parts[0]):
        written -= len(parts.pop(0))
    if written:
        parts[0] = parts[0][written:]


class Receiver:
    """Reads one frame after another from `fd`; `read` returns the next message when whole.

    On a non-blocking pipe `read` returns what it has so far (`NOTHING` until the frame
    is complete); on a blocking one it waits for the whole frame. `EOFError` when the
    writer is gone.
    """

    NOTHING = object()

    def __init__(self, fd: int, decode: Callable[[bytearray, list[bytearray]], Any]) -> None:
        self.fd = fd
        self.decode = decode  # `unpickle` or `read_reply`
        self._start()

    def _start(self) -> None:
        self._sizes = [_HEADER.size]  # still to read: header, lengths, payload, buffers
        self._done: list[bytearray] = []
        self._count = 0  # out-of-band buffers in this frame
        self._part = bytearray(_HEADER.size)
        self._filled = 0

    def read(self) -> Any:
        while True:
            view = memoryview(self._part)[self._filled :]
            if view:
                try:
                    count = os.readv(self.fd, [view])
                except BlockingIOError:
                    return self.NOTHING
                if count == 0:
                    raise EOFError("the worker's pipe closed")
                self._filled += count
                if self._filled < len(self._part):
                    continue
            message = self._next_part()
            if message is not self.NOTHING:
                return message

    def _next_part(self) -> Any:
        """The part just read is whole: size the next one, or decode the frame."""
        self._done.append(self._part)
        self._sizes.pop(0)
        if len(self._done) == 1:
            length, self._count = _HEADER.unpack(self._part)
            if self._count > MAX_BUFFERS:
                raise BadFrame(f"a frame of {self._count:,} buffers")
            self._sizes = [_LENGTH.size * self._count] if self._count else []
            self._sizes.append(length)
        elif len(self._done) == 2 and self._count:
            self._sizes += struct.unpack(f"<{self._count}Q", self._part)
        if sum(self._sizes) > MAX_FRAME_BYTES:
            raise BadFrame(f"a frame of {sum(self._sizes):,} bytes")
        if self._sizes:
            self._part, self._filled = bytearray(self._sizes[0]), 0
            return self.NOTHING
        payload, *buffers = self._done[2 if self._count else 1 :]
        self._start()
        return self.decode(payload, buffers)
