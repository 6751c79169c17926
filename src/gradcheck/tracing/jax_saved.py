"""A saved JAX check's ops file: what `save_case` writes for a trace with opaque nodes or
cuts, and what that file calls to declare them again and make its engine.

A traced equation cannot be written as Python, so each opaque node is named again by
what it calls: a custom rule by the user's ``jax.custom_vjp``/``jax.custom_jvp`` itself,
imported (by module where it can be imported, else from its file; defined at the top of
a module, taking its arrays as its arguments), called on the node's arrays (`Custom`); a
primitive by its name and parameters (`Primitive`). The file ends with
``Engine = engine(...)``, so ``gradcheck run case.yaml --ops case_ops.py --engine
case_ops.py:Engine`` checks the saved case as the trace did.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .jax_opaque import Custom, JaxCall, Primitive, declare_call, engine_class
from .jax_trace import source
from .opaque import cuts, stop_op
from .program import Program, TraceError

__all__ = ["Custom", "JaxCall", "Primitive", "engine", "from_file", "ops_file_text"]


def engine(name: str, calls: dict[str, JaxCall], stops: tuple[str, ...] = ()) -> type:
    """Declare each opaque op of `calls` under its name, and the cuts; the engine class."""
    for stop in stops:
        stop_op(stop)
    ops = {op: declare_call(call, None, op) for op, call in calls.items()}
    custom_vjps = [o.label for o in ops.values() if "jax.custom_vjp" in o.label]
    return engine_class({op: o.method for op, o in ops.items()}, name, custom_vjps)


def from_file(path: str, qualname: str) -> Any:
    """A custom rule defined in a file that is no package's module (a script, a test file);
    a relative `path` is from the ops file's folder (the caller's ``__file__``'s)."""
    from ..util.modules import import_file

    here = Path(inspect.stack()[1].filename).resolve().parent
    module = import_file(here / path, f"the custom rule's file {path}", prefix="gradcheck_saved")
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def ops_file_text(program: Program, name: str, ops_file: Path, command: str) -> str:
    """The ops file's text for `program`'s opaque ops and cuts."""
    imports, calls = [], []
    for op_name, opaque in program.opaque.items():
        call = opaque.call
        target = _target(call, op_name, ops_file, imports)
        fixed = "{" + ", ".join(f"{i}: {_array(v)}" for i, v in call.fixed.items()) + "}"
        arguments = ", ".join([target, repr(call.params), fixed, repr(call.picks),
                               repr(call.integer), repr(call.same)])  # fmt: skip
        calls.append(f"        {op_name!r}: JaxCall({arguments}),")
    stops = tuple(sorted({stop for _, stop in cuts(program)}))
    header = [
        f'"""The opaque nodes and cuts of {name}\'s traced check (gradcheck.jax.check,',
        "save_case): each declared as a gradcheck op, and the engine that runs them:",
        "",
        f"    {command}",
        '"""',
        "",
        "import numpy as np  # noqa: F401  (the calls' literals and dtypes)",
        "",
        "from gradcheck.tracing.jax_saved import (  # noqa: F401",
        "    Custom, JaxCall, Primitive, engine, from_file,",
        ")",
        *dict.fromkeys(imports),
        "",
        "Engine = engine(",
        f"    {name!r},",
        "    {",
        *calls,
        "    },",
        f"    stops={stops!r},",
        ")",
        "",
    ]
    return "\n".join(header)


def _target(call: JaxCall, op_name: str, ops_file: Path, imports: list[str]) -> str:
    """What the call calls, as Python: the user's custom function imported, a primitive."""
    eqn = call.target.eqn
    if not call.custom:
        settings = {k: _python(v, op_name) for k, v in eqn.params.items()}
        said = "{" + ", ".join(f"{k!r}: {v}" for k, v in settings.items()) + "}"
        return f"Primitive({eqn.primitive.name!r}, {said})"
    fn, module = _custom_function(eqn, op_name)
    name = module.__name__
    # A package's module by name (its relative imports need it); a top-level module or a
    # script by its file: whatever folder the saved case is run from, it is found.
    if "." in name and _importable(name):
        imports.append(f"from {name} import {fn.__name__}")
        return f"Custom({fn.__name__})"
    relative = Path(module.__file__).resolve()
    with contextlib.suppress(ValueError):
        relative = relative.relative_to(ops_file.resolve().parent)
    return f"Custom(from_file({str(relative)!r}, {fn.__name__!r}))"


def _custom_function(eqn: Any, op_name: str) -> tuple[Any, Any]:
    """The user's custom_vjp/custom_jvp a traced call made, and its module: found by the
    name and line JAX recorded, at the top of a loaded module, taking the call's arrays."""
    found = source(eqn.params["call_jaxpr"].jaxpr.debug_info)
    if found is not None:
        name, file, line = found
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            fn = getattr(module, name, None)
            if (
                path is not None
                and isinstance(fn, (jax.custom_vjp, jax.custom_jvp))
                and os.path.realpath(path) == os.path.realpath(file)
                and fn.fun.__code__.co_firstlineno == line
                and not fn.nondiff_argnums
                and not eqn.params.get("num_consts")
                and len(inspect.signature(fn.fun).parameters) == len(eqn.invars)
            ):
                return fn, module
    raise TraceError(
        f"{op_name} cannot be imported again by a saved case: define the custom rule at the "
        "top of a module, taking its arrays as its arguments (no nondiff_argnums)"
    )


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except Exception:
        return False
    return True


def _array(value: np.ndarray) -> str:
    return f"np.asarray({value.tolist()!r}, {str(value.dtype)!r})"


def _python(value: Any, op_name: str) -> str:
    """A primitive's parameter as Python that gives it back, or a TraceError: literals,
    their tuples and dicts, and dtypes; never a jaxpr or a function."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return repr(value.item())
    if isinstance(value, np.dtype):
        return f"np.dtype({str(value)!r})"
    if isinstance(value, (tuple, list)):
        items = [_python(v, op_name) for v in value]
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_python(v, op_name)}" for k, v in value.items()) + "}"
    raise TraceError(
        f"{op_name} has a parameter save_case cannot write as Python ({str(value)[:80]}): "
        "check it through gradcheck.jax.check, or write the case by hand"
    )
