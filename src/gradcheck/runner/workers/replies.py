"""A worker's replies as plain data: MessagePack for the structure, raw buffers for arrays.

A reply is one of four messages (`REPLIES`), sent as ``[kind, fields]``: each dataclass
a map of its fields by name, each array an extension naming its dtype, its shape and
the out-of-band buffer that holds its bytes. Reading is schema'd: what is built is
decided by the type hints of the dataclass the kind names, never by the frame, and
every value is checked against its field's hint (a string where a string belongs, an
array of an allowed dtype and a size that fits its buffer where an array belongs).
Nothing in a frame can name a callable, so nothing an engine writes to its reply pipe
runs in gradcheck's process, which alone computes the verdicts and the exit code.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from ...checking.engine_step import EngineOutcome
from .messages import Diagnosed, InitFailed, Ready

REPLIES: dict[str, type] = {
    kind.__name__: kind for kind in (Ready, InitFailed, EngineOutcome, Diagnosed)
}
_ARRAY = 1  # the one extension type: an array, [dtype name, shape, buffer index]
# Arrays a reply may hold: the engine's results and the comparisons' (floats, the
# untrusted masks' bools) and whatever integer arrays a diagnosis keeps.
_DTYPES = (
    "float16", "bfloat16", "float32", "float64", "bool",
    *(f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)),
)  # fmt: skip
_MAX_DEPTH = 32  # dataclasses inside dataclasses: a hint's `also`, an outcome's `checks`
_TEXT = "surrogatepass"  # an engine's text may hold lone surrogates: the reports escape them


class BadReply(ValueError):
    """A frame that is not a reply of the protocol's."""


def pack(message: Any) -> tuple[bytes, list[memoryview]]:
    """`message` (one of `REPLIES`) as MessagePack and its arrays' buffers, in order;
    `TypeError` for a value the protocol has no place for."""
    buffers: list[memoryview] = []

    def plain(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            array = value.astype(value.dtype.newbyteorder("="), order="C", copy=False)
            if array.dtype.name not in _DTYPES:
                raise TypeError(f"an array of dtype {array.dtype} cannot be sent")
            buffers.append(memoryview(array.reshape(-1).view(np.uint8)))
            header = msgpack.packb([array.dtype.name, array.shape, len(buffers) - 1])
            return msgpack.ExtType(_ARRAY, header)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        raise TypeError(f"a {type(value).__name__} cannot be sent")

    payload = msgpack.packb(
        [type(message).__name__, plain(message)], default=plain, unicode_errors=_TEXT
    )
    return payload, buffers


def unpack(payload: bytes | bytearray, buffers: list[bytearray]) -> Any:
    """The reply `payload` and its `buffers` hold; `BadReply` saying what is wrong."""
    used: set[int] = set()

    def array(code: int, data: bytes) -> np.ndarray:
        if code != _ARRAY:
            raise BadReply(f"unknown extension type {code}")
        try:
            dtype, shape, index = msgpack.unpackb(data)
        except (ValueError, TypeError) as e:
            raise BadReply(f"an array's header does not read ({e})") from None
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            raise BadReply(f"an array of dtype {dtype!r}, not one of {', '.join(_DTYPES)}")
        if not (isinstance(shape, list) and all(_count(n) for n in shape)):
            raise BadReply(f"an array of shape {shape!r}")
        if not (_count(index) and index < len(buffers)) or index in used:
            raise BadReply(f"an array in buffer {index!r} of {len(buffers)}")
        used.add(index)
        buffer = buffers[index]
        if len(buffer) != math.prod(shape) * _dtype(dtype).itemsize:
            raise BadReply(f"an array of shape {shape} in a buffer of {len(buffer)} bytes")
        return np.frombuffer(buffer, _dtype(dtype)).reshape(shape)

    try:
        kind, fields = msgpack.unpackb(payload, ext_hook=array, unicode_errors=_TEXT)
    except BadReply:
        raise
    except (ValueError, TypeError) as e:  # msgpack's errors, a frame not of two parts
        raise BadReply(f"not a reply ({type(e).__name__}: {e})") from None
    if not isinstance(kind, str) or kind not in REPLIES:
        raise BadReply(f"unknown reply {str(kind)[:80]!r}")
    return _reader(REPLIES[kind])(fields, 0)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


@functools.cache
def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes  # only where a reply holds one: most runs never import it

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


Reader = Callable[[Any, int], Any]  # (the value read, dataclass depth) -> the value built


@functools.cache
def _reader(hint: Any) -> Reader:
    """How to build a value of `hint` from what MessagePack read: a `BadReply` for a
    value that does not fit. The hints are the messages' own (`REPLIES`, recursively)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _dataclass_reader(hint)
    if origin in (types.UnionType, typing.Union):  # `X | None`, the only unions used
        (inner,) = [a for a in args if a is not type(None)]
        read = _reader(inner)
        return lambda v, d: None if v is None else read(v, d)
    if origin is typing.Literal:
        return _checked(lambda v: type(v) is str and v in args, f"one of {args}")
    if origin is list:
        item = _reader(args[0])
        return _container(list, lambda v, d: [item(x, d) for x in v])
    if origin is tuple:
        item = _reader(args[0])  # `tuple[int, ...]`, the only tuples used
        return _container(list, lambda v, d: tuple(item(x, d) for x in v))
    if origin is dict:
        key, value = _reader(args[0]), _reader(args[1])
        return _container(dict, lambda v, d: {key(k, d): value(x, d) for k, x in v.items()})
    plain = {
        str: (lambda v: type(v) is str, "a string"),
        int: (lambda v: type(v) in (int, bool), "an integer"),
        float: (lambda v: type(v) in (float, int), "a number"),
        bool: (lambda v: type(v) is bool, "true or false"),
    }
    if hint is np.ndarray:  # a NumPy float scalar is a float to MessagePack: one again
        return lambda v, d: np.float64(v) if type(v) is float else _is_array(v, d)
    if hint in plain:
        return _checked(*plain[hint])
    raise TypeError(f"no reader for {hint!r}")  # a message given a field of a new kind


def _is_array(value: Any, depth: int) -> np.ndarray:
    if type(value) is not np.ndarray:
        raise BadReply(f"{_shown(value)} where an array belongs")
    return value


def _checked(ok: Callable[[Any], bool], what: str) -> Reader:
    def read(value: Any, depth: int) -> Any:
        if not ok(value):
            raise BadReply(f"{_shown(value)} where {what} belongs")
        return value

    return read


def _container(kind: type, build: Reader) -> Reader:
    def read(value: Any, depth: int) -> Any:
        if type(value) is not kind:
            raise BadReply(f"{_shown(value)} where a {kind.__name__} belongs")
        return build(value, depth)

    return read


def _dataclass_reader(kind: type) -> Reader:
    hints = typing.get_type_hints(kind)
    fields = {f.name: f for f in dataclasses.fields(kind) if f.init}
    required = {
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }

    readers: dict[str, Reader] = {}  # made on first use: a hint may name its own class

    def read(value: Any, depth: int) -> Any:
        if type(value) is not dict:
            raise BadReply(f"{_shown(value)} where {kind.__name__} belongs")
        if depth >= _MAX_DEPTH:
            raise BadReply(f"{kind.__name__}s nested more than {_MAX_DEPTH} deep")
        unknown = [str(k)[:60] for k in value if k not in fields]
        if unknown:
            raise BadReply(f"{kind.__name__} has no field {', '.join(unknown)}")
        if not required <= value.keys():
            missing = ", ".join(sorted(required - value.keys()))
            raise BadReply(f"{kind.__name__} without its field {missing}")
        if not readers:
            readers.update((name, _reader(hints[name])) for name in fields)
        return kind(**{k: readers[k](v, depth + 1) for k, v in value.items()})

    return read


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {str(value)[:60]!r}"
