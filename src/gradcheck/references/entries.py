"""A reference cache entry: its key (everything that determines the reference), and its
bytes (`encode_entry`, `decode_entry`); see `references.cache` for the format."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..cases.dtypes import DTYPES, numpy_dtype
from ..cases.model import Case
from ..engines.driver import EngineRun

# Bump when the reference computation changes (TensorFlowEngine, run_engine, op.tf builders).
REFERENCE_VERSION = 1


FORMAT = 1


MAGIC = b"gradcheck-reference"


class CorruptEntry(Exception):
    """An entry that fails its checksum or cannot be decoded."""


def reference_key(
    case: Case,
    tensorflow_version: str,
    reference_version: int = REFERENCE_VERSION,
    kind: str = "tensorflow",
    check: str = "vjp",
) -> str:
    """The sha256 (hex) of everything that determines the `kind` reference's results for
    `case` and `check` (``vjp``, the gradients; ``jvp``, forward mode; ``hvp``, second order);
    `tensorflow_version` is NumPy's for the numeric reference."""
    digest = hashlib.sha256()

    def part(tag: str, data: bytes | str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        digest.update(f"{tag}:{len(raw)}:".encode())  # length-prefixed: parts cannot run together
        digest.update(raw)

    part("reference", str(reference_version))
    if kind != "tensorflow":
        part("kind", kind)
    part("tensorflow", tensorflow_version)
    part("onednn", os.environ.get("TF_ENABLE_ONEDNN_OPTS", "0"))
    part("expr", case.expr)
    ops = [
        [n.op.name, n.op.tf_name, sorted(n.attrs.items())]
        + ([n.op.origin, _declaring_file_digest(n.op.origin)] if n.op.origin else [])
        for n in case.expression.op_nodes
        if n.op
    ]
    part("ops", json.dumps(ops, default=repr))
    part("wrt", json.dumps(list(case.wrt)))
    part("dtype", case.dtype)
    for name in sorted(case.inputs):
        part("input", name)
        _hash_array(part, case.inputs[name])
    part("cotangent", "")
    _hash_array(part, case.cotangent)
    if check != "vjp":  # the JVPs along the tangents, or the gradient of sum(grad * v)
        part("check", check)
        for name, array in (case.tangents() if check == "jvp" else case.directions()).items():
            part("direction", name)
            _hash_array(part, array)
    return digest.hexdigest()


def _declaring_file_digest(origin: str) -> str:
    """The sha256 of the file that declared a user op (``file:line``): edit it, miss the cache."""
    path = Path(origin.rpartition(":")[0])
    try:
        stat = path.stat()
    except OSError:
        return "unreadable"
    # Read once per version of the file: `run --watch` reloads an ops file once saved.
    return _file_digest(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _file_digest(path: Path, mtime_ns: int, size: int) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def _hash_array(part: Callable[[str, bytes | str], None], array: np.ndarray) -> None:
    array = np.asarray(array)
    part("dtype", f"{array.dtype.name}/{array.dtype.str}")
    part("shape", json.dumps(list(array.shape)))
    part("data", np.ascontiguousarray(array).tobytes())


def encode_entry(key: str, tensorflow_version: str, run: EngineRun) -> bytes:
    arrays = [("forward", run.forward)] + [(f"grad:{n}", g) for n, g in run.grads.items()]
    arrays += [(f"untrusted:{n}", mask) for n, mask in run.untrusted.items()]
    blobs, described = [], []
    for name, array in arrays:
        array = np.asarray(array)
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        blobs.append(buffer.getvalue())
        described.append({"name": name, "dtype": array.dtype.name, "size": len(blobs[-1])})
    header = {
        "key": key,
        "tensorflow": tensorflow_version,
        "reference_version": REFERENCE_VERSION,
        "arrays": described,
        "notes": list(run.notes),
        "slack": dict(run.slack),
    }
    body = json.dumps(header, sort_keys=True).encode() + b"\n" + b"".join(blobs)
    checksum = hashlib.sha256(body).hexdigest()
    return MAGIC + f" {FORMAT} {checksum}\n".encode() + body


def decode_entry(raw: bytes, key: str) -> EngineRun:
    """The reference an entry holds; `CorruptEntry` unless every check passes, the
    structure's included (a checksum has no secret: a forged entry may be well summed)."""
    try:
        first, body = raw.split(b"\n", 1)
        magic, version, checksum = first.split(b" ")
        if magic != MAGIC or version != str(FORMAT).encode():
            raise CorruptEntry("not a gradcheck reference entry of this format")
        if hashlib.sha256(body).hexdigest().encode() != checksum:
            raise CorruptEntry("checksum mismatch (truncated or altered)")
        header_line, payload = body.split(b"\n", 1)
        header = json.loads(header_line)
        _need(isinstance(header, dict) and header.get("key") == key, "entry holds another key")
        arrays: dict[str, np.ndarray] = {}
        offset = 0
        described = header.get("arrays")
        _need(isinstance(described, list), "no list of arrays")
        for item in described:
            _need(isinstance(item, dict), "an array described by no table")
            name, dtype, size = item.get("name"), item.get("dtype"), item.get("size")
            _need(isinstance(name, str) and name not in arrays, f"array name {name!r}")
            _need(isinstance(size, int) and 0 <= size <= len(payload) - offset, f"{name} size")
            wanted = ("bool",) if name.startswith("untrusted:") else DTYPES
            _need(dtype in wanted, f"{name} has dtype {dtype!r}, not one of {wanted}")
            arrays[name] = _load_array(payload[offset : offset + size], dtype)
            offset += size
        if offset != len(payload) or "forward" not in arrays:
            raise CorruptEntry("payload does not match its header")
        return _run(header, arrays)
    except CorruptEntry:
        raise
    except Exception as e:  # whatever else a damaged entry makes the decoding raise
        raise CorruptEntry(f"{type(e).__name__}: {e}") from e


def _need(ok: bool, problem: str) -> None:
    if not ok:
        raise CorruptEntry(problem)


def _run(header: dict, arrays: dict[str, np.ndarray]) -> EngineRun:
    """The entry's reference, once every field it holds has the type and shape a reference
    has: float arrays, one gradient at least, boolean masks and finite slacks per gradient,
    notes as text."""
    grads = {n.removeprefix("grad:"): a for n, a in arrays.items() if n.startswith("grad:")}
    untrusted = {
        n.removeprefix("untrusted:"): a for n, a in arrays.items() if n.startswith("untrusted:")
    }
    _need(len(arrays) == 1 + len(grads) + len(untrusted), "an array of no known kind")
    _need(bool(grads), "no gradients")
    for name, mask in untrusted.items():
        _need(name in grads and mask.shape == grads[name].shape, f"untrusted:{name}'s shape")
    notes, slack = header.get("notes"), header.get("slack")
    _need(isinstance(notes, list) and all(isinstance(n, str) for n in notes), "notes")
    _need(isinstance(slack, dict), "slack")
    for name, value in slack.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        _need(name in grads and number and 0 <= value < math.inf, f"slack {name}: {value!r}")
    return EngineRun(arrays["forward"], grads, notes=notes, untrusted=untrusted, slack=slack)


def checked_entry(raw: bytes, key: str, case: Case, check: str) -> EngineRun:
    """`decode_entry`, and `CorruptEntry` unless the reference fits `case` too."""
    run = decode_entry(raw, key)
    problem = misfit(run, case, check)
    if problem:
        raise CorruptEntry(f"it holds {problem}")
    return run


def misfit(run: EngineRun, case: Case, check: str) -> str | None:
    """How a decoded entry does not fit `case` (the key says it is its reference), or
    None: the forward value's shape, a gradient per input in `wrt` of the input's shape."""
    output = case.expression.output.shape
    if run.forward.shape != output:
        return f"a forward value of shape {run.forward.shape}, the case's is {output}"
    names = set(case.wrt) if check == "vjp" else set(case.wrt_inputs)
    if set(run.grads) != names:
        return f"gradients for {sorted(run.grads)}, the case asks for {sorted(names)}"
    for name, grad in run.grads.items():
        shape = output if check == "jvp" else case.expression.lookup(name).shape
        if grad.shape != shape:
            return f"a gradient of {name} of shape {grad.shape}, not {shape}"
    return None


AST_RACE = "AST constructor recursion depth mismatch"
AST_RETRIES = 3


def _npy(blob: bytes) -> np.ndarray:
    """One saved array. NumPy reads its header with ast.literal_eval, which CPython 3.11
    and 3.12 may fail with a spurious SystemError while another thread builds ASTs, as
    the TensorFlow import gradcheck overlaps with reading the cache does (CPython
    gh-106905: the depth counter is shared): the race is transient, so it is retried."""
    for _ in range(AST_RETRIES - 1):
        try:
            return np.load(io.BytesIO(blob), allow_pickle=False)
        except SystemError as e:
            if AST_RACE not in str(e):
                raise
    return np.load(io.BytesIO(blob), allow_pickle=False)


def _load_array(blob: bytes, dtype_name: str) -> np.ndarray:
    array = _npy(blob)
    if array.dtype.name != dtype_name:
        # NumPy saves extension dtypes (ml_dtypes' bfloat16) as raw void bytes.
        # Anything else (a string, complex, structured, datetime array) is no reference.
        wanted = numpy_dtype(dtype_name)
        if array.dtype != np.dtype(f"V{wanted.itemsize}") or dtype_name != "bfloat16":
            raise CorruptEntry(f"array saved as {array.dtype}, header says {dtype_name}")
        array = array.view(wanted)
    return array


def largest_entry(case: Case) -> int:
    """The most bytes an entry of `case`'s reference can hold: float64 arrays of the output's
    and every wrt node's shape (and a numeric reference's masks beside the gradients), with
    generous room for headers."""
    shapes = [case.expression.output.shape, *(case.expression.lookup(n).shape for n in case.wrt)]
    return 16 * sum(math.prod(shape) for shape in shapes) + 8192 * len(shapes) + (1 << 16)
