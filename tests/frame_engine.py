"""A correct engine (the builtin one) that writes a hostile frame to its worker's reply
pipe, for tests/test_worker_frames.py: the frame is picked by the name of the case's
input (`FRAMES`), and the engine then answers as usual, or (a truncated frame) exits.

The pickles are the old reply format's every opcode class that names or calls something
(GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ), each creating the file ``MARKER.<name>``
in the run's folder if it is ever unpickled; the rest are MessagePack frames that are
well-formed but wrong (dtypes, shapes, fields, kinds) and frames whose sizes lie.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import types

import msgpack

from gradcheck.checking.engine_step import EngineOutcome
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.driver import EngineRun


def frame(payload: bytes, *buffers: bytes, count: int | None = None) -> bytes:
    """The channel's framing: payload length, buffer count, buffer lengths, the parts."""
    lengths = b"".join(struct.pack("<Q", len(b)) for b in buffers)
    n = len(buffers) if count is None else count
    return struct.pack("<QI", len(payload), n) + lengths + payload + b"".join(buffers)


def touch(name: str) -> str:
    return f"touch MARKER.{name}"


class _Calls:
    """Pickles as a call of `os.system` (STACK_GLOBAL and REDUCE at protocol 4)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def _array(dtype: str, shape: list[int], index: int = 0) -> msgpack.ExtType:
    return msgpack.ExtType(1, msgpack.packb([dtype, shape, index]))


def _outcome(forward, grads=None, **extra) -> bytes:
    run = {"forward": forward, "grads": grads or {}, **extra}
    return msgpack.packb(["EngineOutcome", {"run": run}])


def _nested(depth: int) -> dict:
    """An outcome whose `checks` hold an outcome whose `checks` hold ..., `depth` deep."""
    return {"checks": {"jvp": _nested(depth - 1)}} if depth else {}


_OLD_OUTCOME = pickle.dumps(
    EngineOutcome(EngineRun(forward=__import__("numpy").ones(()), grads={})), protocol=5
)
FRAMES: dict[str, bytes] = {
    # The old format's opcodes, protocol 0 spelled out, then pickle's own.
    "global_reduce": frame(f"cos\nsystem\n(S'{touch('global_reduce')}'\ntR.".encode()),
    "inst": frame(f"(S'{touch('inst')}'\nios\nsystem\n.".encode()),
    "obj": frame(f"(cos\nsystem\nS'{touch('obj')}'\no.".encode()),
    "stack_global": frame(pickle.dumps(_Calls(touch("stack_global")), protocol=4)),
    "build": frame(pickle.dumps(types.SimpleNamespace(a=1), protocol=2)),  # REDUCE, BUILD
    "old_reply": frame(_OLD_OUTCOME),  # an honest reply in the old format: refused too
    # MessagePack, well-formed, wrong.
    "object_dtype": frame(_outcome(_array("object", [1])), b"\0" * 8),
    "unicode_dtype": frame(_outcome(_array("<U2", [1])), b"\0" * 8),
    "complex_dtype": frame(_outcome(_array("complex128", [1])), b"\0" * 16),
    "size_lies": frame(_outcome(_array("float64", [1000])), b"\0" * 8),
    "no_buffer": frame(_outcome(_array("float64", [1], index=7)), b"\0" * 8),
    "text_as_array": frame(_outcome("os.system")),
    "unknown_kind": frame(msgpack.packb(["os.system", {"command": touch("unknown_kind")}])),
    "unknown_field": frame(msgpack.packb(["EngineOutcome", {"__class__": "os.system"}])),
    "unknown_ext": frame(msgpack.packb(["EngineOutcome", {"run": msgpack.ExtType(9, b"")}])),
    "list_for_text": frame(msgpack.packb(["EngineOutcome", {"error": [[[]]]}])),
    "deep": frame(msgpack.packb(["EngineOutcome", _nested(40)])),
    "deepest": frame(b"\x92\xadEngineOutcome" + b"\x91" * 100_000 + b"\xc0"),  # lists
    "trailing": frame(msgpack.packb(["InitFailed", {"message": "x"}]) + b"\xc1"),
    # Sizes that lie, refused before anything is allocated for them.
    "huge_payload": struct.pack("<QI", 1 << 62, 0),
    "huge_count": struct.pack("<QI", 8, 0xFFFFFFFF),
    "huge_buffer": struct.pack("<QIQ", 8, 1, 1 << 62),
    "truncated": frame(_outcome(_array("float64", [1])), b"\0" * 8)[:-5],
}


class Engine(BuiltinEngine):
    name = "frames"

    def leaf(self, name, value):
        self.names = [*getattr(self, "names", []), name]
        return super().leaf(name, value)

    def grad(self, output, wrt, seed):
        for name in getattr(self, "names", []):
            if name in FRAMES:
                os.write(int(sys.argv[2]), FRAMES[name])  # the worker's reply pipe
                if name == "truncated":
                    os._exit(0)  # nothing follows the frame's start
        return super().grad(output, wrt, seed)
