"""A saved PyTorch check's ops file: what `save_case` writes for a trace with opaque
nodes or cuts, and what that file calls to declare them again and make its engine.

The file imports the user's Functions (by module where it can be imported, else from
their file), writes each opaque op's `OpaqueCall` as Python, and ends with
``Engine = engine(...)``, so ``gradcheck run case.yaml --ops case_ops.py --engine
case_ops.py:Engine`` checks the saved case as the trace did.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
from pathlib import Path
from typing import Any

import torch

from .opaque import cuts, stop_op
from .program import Program, TraceError
from .torch_opaque import OpaqueCall, T, declare_call, engine_class

__all__ = ["OpaqueCall", "T", "aten", "engine", "from_file", "ops_file_text"]


def engine(name: str, calls: dict[str, OpaqueCall], stops: tuple[str, ...] = ()) -> type:
    """Declare each opaque op of `calls` under its name, and the cuts; the engine class."""
    for stop in stops:
        stop_op(stop)
    methods = {op: declare_call(call, None, name=op).method for op, call in calls.items()}
    return engine_class(methods, name)


def aten(name: str) -> Any:
    """An ATen op by its name and overload (``"atan.default"``)."""
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def from_file(path: str, qualname: str) -> Any:
    """A class defined in a file that is no package's module (a script, a test file); a
    relative `path` is from the ops file's folder (the caller's ``__file__``'s)."""
    from ..util.modules import import_file

    here = Path(inspect.stack()[1].filename).resolve().parent
    found = here / path
    module = import_file(found, f"the Function's file {path}", prefix="gradcheck_saved")
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def ops_file_text(program: Program, name: str, ops_file: Path, command: str) -> str:
    """The ops file's text for `program`'s opaque ops and cuts."""
    imports, calls = [], []
    for op_name, opaque in program.opaque.items():
        call = opaque.call
        target = _target(call, ops_file, imports)
        arguments = ", ".join(
            [target, _python(call.args, op_name), _python(call.kwargs, op_name),
             repr(call.params), repr(call.integer), str(call.outputs), repr(call.same)]
        )  # fmt: skip
        calls.append(f"        {op_name!r}: OpaqueCall({arguments}),")
    stops = tuple(sorted({stop for _, stop in cuts(program)}))
    header = [
        f'"""The opaque nodes and cuts of {name}\'s traced check (gradcheck.torch.check,',
        "save_case): each declared as a gradcheck op, and the engine that runs them:",
        "",
        f"    {command}",
        '"""',
        "",
        "import torch  # noqa: F401  (the calls' dtypes)",
        "",
        "from gradcheck.tracing.torch_saved import (  # noqa: F401",
        "    OpaqueCall, T, aten, engine, from_file,",
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


def _target(call: OpaqueCall, ops_file: Path, imports: list[str]) -> str:
    if not call.function:
        packet = call.target._schema.name.split("::")[-1]
        return f"aten({f'{packet}.{call.target._overloadname}'!r})"
    cls = call.target
    module = cls.__module__
    # A package's module by name (its relative imports need it); a top-level module or a
    # script by its file: whatever folder the saved case is run from, it is found.
    if "." in module and "<locals>" not in cls.__qualname__ and _importable(module):
        imports.append(f"from {module} import {cls.__qualname__.split('.')[0]}")
        return cls.__qualname__
    file = inspect.getsourcefile(cls)
    if file is None or "<locals>" in cls.__qualname__:
        raise TraceError(
            f"{cls.__name__} is defined inside a function: save_case cannot import it "
            "again; define it at the top of a module"
        )
    relative = Path(file).resolve()
    with contextlib.suppress(ValueError):
        relative = relative.relative_to(ops_file.resolve().parent)
    return f"from_file({str(relative)!r}, {cls.__qualname__!r})"


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except Exception:
        return False
    return True


def _python(value: Any, op_name: str) -> str:
    """`value` (a call's arguments) as Python that gives it back, or a TraceError: its repr,
    read back as literals, `T` slots and torch's names (dtypes) only, never run."""
    text = repr(value)
    try:
        plain = all(isinstance(node, _PLAIN) or _slot_or_torch(node)
                    for node in ast.walk(ast.parse(text, mode="eval")))  # fmt: skip
    except SyntaxError:
        plain = False
    if not plain:
        raise TraceError(
            f"{op_name} is called with an argument save_case cannot write as Python "
            f"({text[:80]}): pass it as a tensor or a plain value"
        )
    return text


_PLAIN = (ast.Expression, ast.Constant, ast.Tuple, ast.List, ast.Dict, ast.Load,
          ast.UnaryOp, ast.USub)  # fmt: skip


def _slot_or_torch(node: ast.AST) -> bool:
    """A `T(k)` slot, or a name of torch's (``torch.float64``) with its parts."""
    if isinstance(node, ast.Call):
        return getattr(node.func, "id", None) == "T" and len(node.args) == 1
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "torch"
    return isinstance(node, ast.Name) and node.id in ("T", "torch")
