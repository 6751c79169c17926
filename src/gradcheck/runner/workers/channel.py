"""Messages between gradcheck and its worker processes: pickles framed over pipes.

A frame is a header (the pickle's length, the number of out-of-band buffers and their
lengths), the pickle (protocol 5) and the buffers: arrays travel out of band, written
from and read into array memory, with no copy in between. `Receiver` reads frames
incrementally from a non-blocking pipe, so the parent can wait for a reply, a timeout
and the worker's output at once; the worker reads its requests blocking.

What a worker sends is read by `PlainUnpickler`, which builds nothing but plain data:
NumPy arrays, gradcheck's result types, builtins. Nothing an engine writes to the pipe
can run code in gradcheck's process, which alone computes verdicts and the exit code.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
from typing import Any

_HEADER = struct.Struct("<QI")  # pickle length, number of buffers
_LENGTH = struct.Struct("<Q")

# (module, name) pairs a worker's reply may name; modules whose every name is plain data.
_NUMPY = {
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    *((m, n) for m in ("numpy._core.multiarray", "numpy.core.multiarray")
      for n in ("scalar", "_reconstruct")),
    *((m, "_frombuffer") for m in ("numpy._core.numeric", "numpy.core.numeric")),
}  # fmt: skip
_PLAIN_MODULES = {"gradcheck.results", "gradcheck.runner.workers.messages"}
_PLAIN_NAMES = {
    *_NUMPY,
    ("gradcheck.engines.driver", "EngineRun"),
    ("gradcheck.checking.engine_step", "EngineOutcome"),
}


def encode(message: Any) -> list[memoryview]:
    """`message` as the memory of one frame, in order (buffers still the arrays' own)."""
    buffers: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    header = _HEADER.pack(len(payload), len(raws)) + b"".join(
        _LENGTH.pack(raw.nbytes) for raw in raws
    )
    return [memoryview(header), memoryview(payload), *(raw for raw in raws if raw.nbytes)]


def send(fd: int, message: Any) -> None:
    """Write `message` to the blocking pipe `fd`."""
    parts = encode(message)
    while parts:
        write_some(fd, parts)


def write_some(fd: int, parts: list[memoryview]) -> None:
    """Write as much of `parts` as `fd` takes in one call, dropping what was written."""
    written = os.writev(fd, parts)
    while parts and written >= len(parts[0]):
        written -= len(parts.pop(0))
    if written:
        parts[0] = parts[0][written:]


class PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module in _PLAIN_MODULES or (module, name) in _PLAIN_NAMES:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a worker's reply may not name {module}.{name}")


class Receiver:
    """Reads one frame after another from `fd`; `read` returns the next message when whole.

    On a non-blocking pipe `read` returns what it has so far (`NOTHING` until the frame
    is complete); on a blocking one it waits for the whole frame. `EOFError` when the
    writer is gone.
    """

    NOTHING = object()

    def __init__(self, fd: int, *, plain: bool) -> None:
        self.fd = fd
        self.plain = plain
        self._start()

    def _start(self) -> None:
        self._sizes = [_HEADER.size]  # the parts still to read: header, lengths, pickle, buffers
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
            self._sizes = [_LENGTH.size * self._count] if self._count else []
            self._sizes.append(length)
        elif len(self._done) == 2 and self._count:
            self._sizes += struct.unpack(f"<{self._count}Q", self._part)
        if self._sizes:
            self._part, self._filled = bytearray(self._sizes[0]), 0
            return self.NOTHING
        payload, *buffers = self._done[2 if self._count else 1 :]
        self._start()
        return self._loads(payload, buffers)

    def _loads(self, payload: bytearray, buffers: list[bytearray]) -> Any:
        if not self.plain:
            return pickle.loads(payload, buffers=buffers)
        return PlainUnpickler(io.BytesIO(payload), buffers=buffers).load()
