"""`gradcheck.jax.check`'s tracing: a JAX function and its arguments into a `Traced`: the
program, the engine that replays it, and the function's own answer.

The differentiated inputs are, as ``jax.test_util.check_grads`` differentiates, the float
arrays among the positional arguments, pytrees searched (`argnums` picks the arguments);
every other leaf (an integer or bool array, a Python number, a keyword argument) is held
as it is and closed over, as ``jax.grad`` holds what it does not differentiate.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from .checking import Traced
from .jax_build import CASE_FILE, Builder
from .jax_opaque import engine_class
from .jax_trace import SKIPPED, Trace, user_line, where_of
from .program import Program, TraceError, Where

_CONCRETE = (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
             jax.errors.TracerIntegerConversionError)  # fmt: skip


@dataclass
class Inputs:
    """The function's arguments: every leaf of (args, kwargs), its name, and which leaves
    are differentiated."""

    leaves: list[Any]
    tree: Any
    names: list[str]
    wrt: list[int]

    def call(self, fn: Callable[..., Any], values: Sequence[Any]) -> Any:
        """fn on its arguments with the differentiated leaves replaced by `values`."""
        leaves = list(self.leaves)
        for i, value in zip(self.wrt, values, strict=True):
            leaves[i] = value
        args, kwargs = jax.tree_util.tree_unflatten(self.tree, leaves)
        return fn(*args, **kwargs)

    def name_of(self, constant: Any) -> str:
        """The name of the argument a constant of the trace is (closed over, as JAX keeps
        it or converted to an array of the same values); '' for any other constant."""
        for i, (leaf, name) in enumerate(zip(self.leaves, self.names, strict=True)):
            if i in self.wrt or not isinstance(leaf, (np.ndarray, jax.Array)):
                continue
            if leaf is constant or (
                np.shape(leaf) == np.shape(constant)
                and np.dtype(leaf.dtype) == np.dtype(constant.dtype)
                and np.array_equal(np.asarray(leaf), np.asarray(constant))
            ):
                return name
        return ""


def trace(fn: Callable[..., Any], args: tuple, kwargs: dict, argnums: Any = None) -> Traced:
    """Trace `fn` on `args` with ``jax.make_jaxpr`` and write it out as a program."""
    name = _name(fn)
    inputs = prepare(fn, args, kwargs, argnums, name)
    values = [inputs.leaves[i] for i in inputs.wrt]
    returned: list[Any] = []

    def flat(*diff: Any) -> list[Any]:
        leaves = jax.tree_util.tree_leaves(inputs.call(fn, diff))
        returned.append([_kind(o) for o in leaves])
        return [o for o in leaves if isinstance(o, jax.Array)]

    # 64-bit mode as the inputs need it: on for float64, off (JAX's default) for a float32
    # function, whose Python and NumPy constants then stay float32 as they do in its session
    wide = any(np.dtype(v.dtype) == np.float64 for v in values)
    try:
        with jax.enable_x64(wide):
            closed = jax.make_jaxpr(flat)(*values)
    except _CONCRETE as e:
        raise _concrete(e, name) from None
    except Exception as e:  # the user's own error, said as theirs, at their line
        where = _raised_at(e)
        raise TraceError(
            f"{name} raised {type(e).__name__}{f' at {where.quoted()}' if where else ''} when "
            f"traced: {str(e).splitlines()[0] if str(e) else ''} (it is traced once by "
            "jax.make_jaxpr, at the arguments' shapes and dtypes)"
        ) from e
    _check_outputs(returned[-1], closed, fn, name)
    names = [inputs.names[i] for i in inputs.wrt]
    traced = Trace.of(closed, values, names, [inputs.name_of(c) for c in closed.consts])
    if not all(v.live for v in traced.outputs):
        raise TraceError(
            f"the output of {name}{_at(fn)} does not depend on any differentiated input: its "
            "gradient is zero; check that it uses its float array arguments (argnums= picks "
            f"them), {CASE_FILE}"
        )
    program = _program(traced)
    builder = Builder(traced, program)
    builder.build(traced.outputs)
    custom_vjps = [o.label for o in program.opaque.values() if "jax.custom_vjp" in o.label]
    engine = engine_class(builder.methods, name, custom_vjps)

    def whole(*diff: Any) -> Any:
        outs = [o.reshape(-1) for o in flat(*diff)]
        return outs[0] if len(outs) == 1 else jax.numpy.concatenate(outs)

    with jax.enable_x64(wide):
        value, pull = jax.vjp(whole, *values)

    def own_grads(cotangent: np.ndarray) -> list[np.ndarray]:
        """fn's own gradient, by jax.vjp of fn itself."""
        seed = np.asarray(cotangent).reshape(-1).astype(value.dtype)
        with jax.enable_x64(wide):
            return [np.asarray(g) for g in pull(seed)]

    return Traced(program, engine, np.asarray(value), own_grads, name, "jax")


def prepare(
    fn: Callable[..., Any], args: tuple, kwargs: dict, argnums: Any, name: str = "fn"
) -> Inputs:
    """Name every leaf of the arguments (the parameter's name, then its path in the pytree)
    and pick the differentiated ones: the float arrays of the positional arguments in
    `argnums` (every positional argument when None)."""
    picked = _argnums(argnums, len(args))
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    paths = [path for path, _ in jax.tree_util.tree_flatten_with_path((args, kwargs))[0]]
    params = _parameter_names(fn, len(args))
    names, wrt = [], []
    for i, (path, leaf) in enumerate(zip(paths, leaves, strict=True)):
        top, position = path[0].idx, path[1]
        head = params[position.idx] if top == 0 else str(position.key)
        names.append("_".join([head, *(_key_text(k) for k in path[2:])]))
        array = isinstance(leaf, (np.ndarray, np.generic, jax.Array))
        if not (array and top == 0 and position.idx in picked):
            continue
        if jax.dtypes.issubdtype(leaf.dtype, np.complexfloating):
            raise TraceError(
                f"{names[-1]}, an argument of {name}{_at(fn)}, is a complex array "
                f"({leaf.dtype}): gradcheck checks real "
                "gradients; pass the real and imaginary parts as two real arrays, "
                f"{CASE_FILE}"
            )
        if jax.dtypes.issubdtype(leaf.dtype, np.floating):
            wrt.append(i)
    if not wrt:
        among = " among argnums" if argnums is not None else ""
        raise TraceError(
            f"{name}{_at(fn)} has no float array argument to differentiate{among} (Python "
            "numbers and "
            "keyword arguments are constants, as under jax.grad); pass "
            "the inputs as arrays"
        )
    dtypes = sorted({str(np.dtype(leaves[i].dtype)) for i in wrt})
    if len(dtypes) > 1:
        raise TraceError(
            f"the differentiated inputs are in {' and '.join(dtypes)}: gradcheck checks one "
            "dtype at a time; cast them to one"
        )
    return Inputs(leaves, tree, names, wrt)


def _argnums(argnums: Any, count: int) -> set[int]:
    if argnums is None:
        return set(range(count))
    given = [argnums] if isinstance(argnums, int) else list(argnums)
    if not all(isinstance(a, int) and -count <= a < count for a in given):
        raise TraceError(f"argnums={argnums!r}: each must be the index of one of the {count} "
                         "positional arguments")  # fmt: skip
    return {a % count for a in given}


def _parameter_names(fn: Callable[..., Any], count: int) -> list[str]:
    """The names of fn's first `count` positional parameters (``args0``... for *args)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names: list[str] = []
    for p in parameters:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names += [f"{p.name}{k}" for k in range(count - len(names))]
    return names[:count] + [f"arg{i}" for i in range(len(names), count)]


def _key_text(key: Any) -> str:
    for attribute in ("key", "idx", "name"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def _kind(leaf: Any) -> tuple[str, str]:
    """What fn returned, as a refusal names it: ("float", ""), ("array", "an array of
    int64"), or ("other", "a float") for what is no JAX array at all."""
    if not isinstance(leaf, jax.Array):
        return "other", f"a {type(leaf).__name__}"
    if jax.dtypes.issubdtype(leaf.dtype, np.floating):
        return "float", ""
    if jax.dtypes.issubdtype(leaf.dtype, np.complexfloating):
        return "array", f"a complex array ({leaf.dtype})"
    return "array", f"an array of {leaf.dtype}"


def _check_outputs(
    kinds: list[tuple[str, str]], closed: Any, fn: Callable[..., Any], name: str
) -> None:
    others = sorted({said for kind, said in kinds if kind == "other"})
    if not kinds or others:
        raise TraceError(
            f"{name} returns {', '.join(others) or 'nothing'}{_at(fn)}: gradcheck checks a "
            "function whose outputs are float JAX arrays (return the array, not float(x), "
            f".item() or a NumPy array), {CASE_FILE}"
        )
    arrays = sorted({said for kind, said in kinds if kind == "array"})
    if arrays:
        line = next((user_line(e) for e in reversed(closed.jaxpr.eqns) if user_line(e)), None)
        at = f" at {line.quoted()}" if line else _at(fn)
        raise TraceError(
            f"{name} returns {' and '.join(arrays)}{at}: it has no real gradient to check; "
            f"return the float value it is computed from, {CASE_FILE}"
        )


def _concrete(e: Exception, name: str) -> TraceError:
    """The refusal for fn reading a traced value as a Python one, at the user's line."""
    where = _raised_at(e)
    at = f" at {where.quoted()}" if where else ""
    if isinstance(e, jax.errors.TracerArrayConversionError):
        what = "converts a value that depends on its inputs to a NumPy array"
        instead = "compute it with jax.numpy"
    elif isinstance(e, jax.errors.TracerIntegerConversionError):
        what = "uses a value that depends on its inputs as a Python int (an index, a shape)"
        instead = "index with jax.numpy (jnp.take, lax.dynamic_slice)"
    elif isinstance(e, jax.errors.TracerBoolConversionError):
        what = "branches on a value that depends on its inputs (Python control flow)"
        instead = "write the branch with jnp.where or jax.lax.cond"
    else:
        what = "reads a value that depends on its inputs as a Python value (int(), float())"
        instead = "keep it an array (jnp.where, jax.lax.cond, jnp.take)"
    return TraceError(
        f"{name} {what}{at}: jax.make_jaxpr traces it with no value there "
        f"({type(e).__name__}); {instead}, {CASE_FILE}"
    )


def _raised_at(e: Exception) -> Where | None:
    """The innermost line of the user's code in the exception's traceback."""
    found = None
    tb = e.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(SKIPPED):
            found = where_of(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def _at(fn: Callable[..., Any]) -> str:
    """`` (defined at file:line)``: where fn is, for a refusal about fn as a whole."""
    try:
        file, line = inspect.getsourcefile(fn), inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return ""
    return f" (defined at {where_of(file, line, '')})" if file else ""


def _program(traced: Trace) -> Program:
    """The program's differentiated inputs, in the function's order, as NumPy arrays."""
    program = Program(str(np.dtype(traced.inputs[0].dtype)))
    for val in traced.inputs:
        value = np.asarray(val.value)
        val.value = value
        program.add_input(val.name, value, True)
    return program


def _name(fn: Any) -> str:
    name = getattr(fn, "__name__", "")
    return name if name.isidentifier() and name != "<lambda>" else "fn"
