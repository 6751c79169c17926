"""Drive any engine through an expression: build it, read the forward value, ask for gradients.

Whatever an engine raises or returns wrongly becomes an `EngineFailure` carrying the
engine's traceback tail, so the runner can report it against the case and go on.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..cases.dtypes import machine_epsilon
from ..expression import Expression, Node
from ..results import Hint
from .protocol import is_functional

_PACKAGE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
TRACEBACK_FRAMES = 4
ENGINE_TEXT_CHARS = 8_000  # of an exception's text kept: a 50 MB message renders at once
_NUMPY_FLOATS = (np.float16, np.float32, np.float64)
_FLOAT_NAMES = ("float16", "bfloat16", "float32", "float64")


class Unsupported(Exception):
    """The engine has no method for an op the expression uses, or its method (or `leaf`,
    `constant`) raised NotImplementedError while the expression was being built; `ops`:
    the ops it lacks (none for `leaf` or `constant`)."""

    def __init__(self, message: str, ops: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.ops = list(ops)


class EngineFailure(Exception):
    """The engine raised, or returned something that is not the gradient asked for."""

    def __init__(
        self, message: str, traceback_tail: str | None = None, what: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.traceback_tail = traceback_tail
        self.what = what  # the call that raised: "grad", "value", a node's text ...


@dataclass
class EngineRun:
    forward: np.ndarray
    grads: dict[str, np.ndarray]
    grads_again: dict[str, np.ndarray] | None = None
    notes: list[str] = field(default_factory=list)
    # What a reference knows of its own accuracy (the numeric one, `references.numeric`), per
    # wrt name: elements it cannot judge, and an atol to add to the case's tolerance.
    untrusted: dict[str, np.ndarray] = field(default_factory=dict)
    slack: dict[str, float] = field(default_factory=dict)
    doubts: list[Hint] = field(default_factory=list)  # `reference-disagreement` (--reference both)
    # What the engine handed back, before conversion: the least precise float dtype
    # among its results ("float32", "bfloat16"), and the library its arrays came from
    # ("numpy", "tensorflow", "torch", ...). The diagnosis reads both.
    dtype: str | None = None
    array_module: str | None = None
    # The other checks a case asks for (`modes: [rev, fwd]`, `order: 2`), each a run of its
    # own whose `grads` are, per input, the JVP along its tangent (`engines.forward`) or
    # its part of the gradient of sum(grad * v) (`engines.second_order`).
    jvp: EngineRun | None = None
    hvp: EngineRun | None = None


def missing_ops(engine: Any, expression: Expression, scalar_only: bool = False) -> list[str]:
    needed = dict.fromkeys(n.op.name for n in expression.op_nodes if n.op)
    if scalar_only:
        needed.update(dict.fromkeys(("mul", "sum")))
    return [name for name in needed if not callable(getattr(engine, name, None))]


def scalar_loss(engine: Any, output: Any, cotangent: np.ndarray) -> Any:
    """``sum(mul(output, constant(cotangent)))`` from the engine's own ops: what an engine
    that differentiates scalars only (`scalar_only = True`) is asked to differentiate."""
    make_constant = getattr(engine, "constant", None) or as_given
    weights = build_call("constant", make_constant, cotangent.copy())
    product = build_call("mul(output, cotangent)", engine.mul, output, weights)
    return build_call("sum(output * cotangent)", engine.sum, product, axis=None, keepdims=False)


def record_returned(run: EngineRun, returned: Sequence[Any]) -> EngineRun:
    """`run` with what the engine handed back noted: the least precise float dtype among
    `returned` (its forward value first, then its gradients) and the forward's library."""
    run.dtype = least_precise_dtype(returned)
    run.array_module = type(returned[0]).__module__.split(".")[0] or None
    return run


def least_precise_dtype(values: Sequence[Any]) -> str | None:
    """The name of the float dtype with the largest epsilon among `values`, if any is a float."""
    floats = {d for d in map(_numpy_dtype, values) if d is not None and d.name in _FLOAT_NAMES}
    return max(floats, key=machine_epsilon).name if floats else None


def _numpy_dtype(value: Any) -> np.dtype | None:
    dtype = getattr(value, "dtype", None)
    if isinstance(dtype, np.dtype):
        return dtype
    try:  # a framework's tensor (its dtype is its own object): NumPy's view of it
        return np.asarray(value).dtype
    except Exception:
        return None


def differentiable_inputs(expression: Expression, wrt: Sequence[str]) -> set[str]:
    """The inputs to build as leaves: those in `wrt`, and those an intermediate wrt node
    depends on. An engine records only what involves a leaf (TensorFlow's tape, the
    builtin engine's `requires_grad`), so a node computed from constants alone would get
    a zero gradient however the output depends on it."""
    names = {n for n in wrt if n in expression.inputs}
    stack = [expression.lookup(n) for n in wrt if n not in expression.inputs]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.is_input and not node.integer:  # an index is never differentiated
            names.add(node.name)
        stack.extend(node.args)
    return names


def build_expression(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    wrt: set[str],
    dtype: np.dtype,
    given: Mapping[Node, Any] | None = None,
    *,
    copy: bool = True,
) -> dict[Node, Any]:
    """Every node of `expression` built in `engine`; inputs in `wrt` as leaves, the nodes
    in `given` as given (a functional engine's primals). `copy=False`: the inputs are the
    caller's copies already (or values a compiling engine traces, which have no copy)."""
    make_constant = getattr(engine, "constant", None)
    if make_constant is None and is_functional(engine):
        make_constant = as_given  # NumPy arrays go into its ops as they are
    built: dict[Node, Any] = dict(given or {})
    for node in expression.nodes:
        if node in built:
            continue
        if node.is_input:
            # A copy, so that an engine that writes into its inputs cannot change the reference's.
            value = np.array(inputs[node.name]) if copy else inputs[node.name]
            if node.integer:  # indices, labels: a constant of their integer dtype, always
                built[node] = build_call("constant", make_constant or as_given, value)
            elif node.name in wrt or make_constant is None:
                built[node] = build_call("leaf", engine.leaf, node.name, value)
            else:
                built[node] = build_call("constant", make_constant, value)
        elif node.is_literal:
            value = np.asarray(node.literal, dtype=dtype)
            if make_constant is None:  # an engine without constants gets an extra leaf
                built[node] = build_call("leaf", engine.leaf, f"literal{node.index}", value)
            else:
                built[node] = build_call("constant", make_constant, value)
        elif node.is_part:  # one output of an op with several: what the engine returned
            built[node] = built[node.args[0]][node.part]
        else:
            op = node.op
            args = [built[a] for a in node.args]
            method = getattr(engine, op.name)
            # A list for a variadic op, but spread where it has a leading attribute (einsum).
            call_args = [args] if op.variadic and op.leading is None else args
            try:
                built[node] = build_call(node.text, method, *call_args, **node.attrs)
            except Unsupported as unsupported:
                unsupported.ops = [op.name]
                raise
            if node.outputs is not None:
                built[node] = several(node, built[node])
    return built


def several(node: Node, returned: Any) -> list[Any]:
    """What an engine's method for an op with several outputs returned, as a list of one
    node per output; an `EngineFailure` unless it is a tuple or list of as many as the op
    gives (SPEC §4: a wrong count is reported against the case)."""
    count = len(node.outputs or ())
    expected = f"a tuple or list of {count} node{'s' if count != 1 else ''}, one per output"
    if not isinstance(returned, (list, tuple)):
        raise EngineFailure(
            f"{node.text} returned {type(returned).__name__}; expected {expected}", what=node.text
        )
    if len(returned) != count:
        raise EngineFailure(
            f"{node.text} returned {len(returned)} node{'s' if len(returned) != 1 else ''}; "
            f"expected {expected}",
            what=node.text,
        )
    return list(returned)


def as_given(value: np.ndarray) -> np.ndarray:
    return value


def build_call(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`call_engine` while building: NotImplementedError means "not supported", like a missing
    method (an adapter scaffold's stubs raise it; so may an op for some attributes)."""
    try:
        return call_engine(what, fn, *args, **kwargs)
    except EngineFailure as failure:
        if isinstance(failure.__cause__, Unsupported):  # raised building a function inside
            raise failure.__cause__ from None
        if isinstance(failure.__cause__, NotImplementedError):
            reason = str(failure.__cause__)
            raise Unsupported(
                f"{what} is not implemented by the engine" + (f" ({reason})" if reason else "")
            ) from failure.__cause__
        raise


# Told what each engine call is about to do (`what`), so a worker can say where its engine
# hung or died ("timed out after 60 s in grad()"). None outside a worker.
_call_listener: Callable[[str], None] | None = None


def listen_to_calls(listener: Callable[[str], None] | None) -> None:
    global _call_listener
    _call_listener = listener


def call_engine(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call into an engine; whatever it raises becomes an `EngineFailure` saying `what`.

    `SystemExit` too: an engine that calls `sys.exit` has failed that call, it does not
    get to end the run.
    """
    if _call_listener is not None:
        _call_listener(what)
    try:
        return fn(*args, **kwargs)
    except (Exception, SystemExit) as e:
        raise EngineFailure(f"{what} raised {describe(e)}", traceback_tail(e), what) from e


def describe(error: BaseException) -> str:
    """`TypeName: message`, even for an exception whose `__str__` raises."""
    if isinstance(error, SystemExit):
        return f"SystemExit (the engine called sys.exit({safe_str(error.code)}))"
    return f"{type(error).__name__}: {safe_str(error)}"


def safe_str(value: object, limit: int = ENGINE_TEXT_CHARS) -> str:
    """`str(value)` as `engine_text`, or a placeholder when an engine's object cannot say
    what it is."""
    try:
        return engine_text(str(value), limit)
    except Exception:
        return f"<{type(value).__name__} whose str() raised>"


def engine_text(text: str, limit: int = ENGINE_TEXT_CHARS) -> str:
    """Text an engine made, as gradcheck keeps it: at most about `limit` characters (the
    head and the tail), lone surrogates as escapes (``\\udcff``: no report could write
    them as UTF-8)."""
    if len(text) > limit:
        half = limit // 2
        left_out = f"\n[... {len(text) - 2 * half:,} characters not kept ...]\n"
        text = text[:half] + left_out + text[-half:]
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def engine_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """`error`'s frames in the engine's own code: gradcheck's dropped, and installed
    libraries' too unless nothing else is left."""
    tb = traceback.extract_tb(error.__traceback__)
    stack = [f for f in tb if not f.filename.startswith(_PACKAGE_DIR)]
    return [f for f in stack if "site-packages" not in f.filename] or stack


def traceback_tail(error: BaseException, frames: int = TRACEBACK_FRAMES) -> str:
    """The last frames of an engine's traceback: the engine's own code, where it has any.

    gradcheck's frames are dropped, and so are installed libraries' (NumPy's internals
    rarely say what the engine did wrong) unless nothing else is left.
    """
    lines = traceback.format_list(engine_frames(error)[-frames:])
    lines += traceback.format_exception_only(type(error), error)
    return engine_text("".join(lines).rstrip(), 2 * ENGINE_TEXT_CHARS)


def as_array(value: Any, what: str) -> np.ndarray:
    """An engine's result as a NumPy float array (its own float dtype kept: `compare`
    works in float64 without a full-size copy), or an `EngineFailure` saying what is
    wrong with it."""
    if value is None:
        raise EngineFailure(f"{what} returned None")
    try:
        array = np.asarray(value)
        if array.dtype.type in _NUMPY_FLOATS:
            return array.copy()  # an engine may go on to change the array it returned
        if array.dtype.kind == "c":
            raise EngineFailure(
                f"{what} returned complex values ({array.dtype}); gradients are real numbers"
            )
        # Integers, booleans and bfloat16 become float64; so do strings and objects
        # that hold numbers, and this conversion refuses those that do not (a complex
        # number among them included).
        return np.array(value, dtype=np.float64)
    except EngineFailure:
        raise
    except Exception as e:  # whatever an engine's array-like raises while being read
        message = f"{what} returned {type(value).__name__}, which is not a numeric array"
        raise EngineFailure(f"{message} ({describe(e)})", traceback_tail(e)) from None


def check_grads(result: Any, names: Sequence[str], what: str = "grad") -> dict[str, np.ndarray]:
    """An engine's gradients (from its `what` method) by wrt name, or an `EngineFailure`."""
    if isinstance(result, (list, tuple)):
        grads = call_engine(f"reading {what}'s result", list, result)
    else:
        raise EngineFailure(
            f"{what} returned {type(result).__name__}; expected a list of {len(names)} "
            f"array{'s' if len(names) != 1 else ''}, "
            f"one per wrt node ({', '.join(names)})"
        )
    if len(grads) != len(names):
        raise EngineFailure(
            f"{what} returned {len(grads)} array{'s' if len(grads) != 1 else ''} for "
            f"{len(names)} wrt node{'s' if len(names) != 1 else ''} ({', '.join(names)})"
        )
    return {name: as_array(g, f"{what} for {name}") for name, g in zip(names, grads, strict=True)}
