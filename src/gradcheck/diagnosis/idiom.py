"""The engine's idiom: which array libraries it is built on, and rules written its way.

A fix states the correct rule (SPEC §6.1): the registry's NumPy text always, and its
TensorFlow spelling too for an engine that builds TensorFlow ops, known from the
modules its adapter's classes import or from the arrays it returns.
"""

from __future__ import annotations

import inspect
import sys
import types

from ..engines.driver import EngineRun
from ..engines.protocol import EngineFactory
from ..ops import Op

KNOWN = frozenset({"tensorflow", "jax", "jaxlib", "torch", "autograd", "mygrad", "numpy"})


def frameworks(factory: EngineFactory, run: EngineRun | None = None) -> frozenset[str]:
    """The known array libraries an engine uses: imported by the modules of its classes
    (its own and its bases'), or the library of the arrays it returned."""
    found: set[str] = set()
    classes = inspect.getmro(factory) if inspect.isclass(factory) else ()
    for cls in classes:
        module = sys.modules.get(cls.__module__)
        if module is None or cls.__module__.startswith("gradcheck."):
            continue
        for value in vars(module).values():
            name = value.__name__ if isinstance(value, types.ModuleType) else None
            name = name or getattr(value, "__module__", None)
            if isinstance(name, str):
                found.add(name.split(".")[0])
    if run is not None and run.array_module:
        found.add(run.array_module)
    return frozenset(found & KNOWN)


def spelling(found: frozenset[str]) -> str:
    """The spelling an engine's fixes use beside NumPy's: "tensorflow" or "numpy"."""
    return "tensorflow" if "tensorflow" in found else "numpy"


def rule(op: Op, arg: int, spell: str, mode: str = "rev") -> str:
    """`op`'s correct VJP (`mode` "fwd": JVP) for argument `arg`, quoted, in NumPy and (when
    asked) TF spelling."""
    numpy, tf = op.rule(arg, mode=mode), op.rule(arg, "tensorflow", mode)
    text = f"`{numpy}`"
    if spell == "tensorflow" and tf != numpy:
        text += f" (in TensorFlow: `{tf}`)"
    return text


def param(op: Op, arg: int) -> str:
    """The name of `op`'s argument `arg` as its rules write it (`a`, `b`, `x`, `values[i]`)."""
    return f"{op.params[0]}[{arg}]" if op.variadic else op.params[arg]
