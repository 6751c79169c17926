"""The engine's idiom: which array libraries it is built on, and rules written its way.

A fix states the correct rule (SPEC §6.1): the registry's NumPy text always, and its
TensorFlow, PyTorch or JAX spelling too for an engine built on that library (the stock
torch and jax adapters, a subclass of them, a user op checked through them), known from
the modules its adapter's classes import or from the arrays it returns.
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


# The libraries whose spelling the rule texts have, first found first used (an engine
# importing TensorFlow and PyTorch builds TensorFlow ops, as before PyTorch's came).
SPELLINGS = {"tensorflow": "TensorFlow", "torch": "PyTorch", "jax": "JAX"}
_STOCK, _BUILTIN = "gradcheck.engines.stock.", "gradcheck.engines.builtin"
_LIBRARY = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jax", "jaxlib": "jax"}


def spelling(found: frozenset[str]) -> str:
    """The spelling an engine's fixes use beside NumPy's: "tensorflow", "torch", "jax" or
    "numpy"."""
    spelled = {_LIBRARY[name] for name in found if name in _LIBRARY}
    return next((name for name in SPELLINGS if name in spelled), "numpy")


def engine_spelling(factory: EngineFactory, run: EngineRun | None = None) -> str:
    """The spelling of an engine's fixes: TensorFlow's for one that builds TensorFlow ops;
    else that of the gradcheck engine it is or extends (the stock torch adapter's
    PyTorch, the jax adapter's JAX, the builtin engine's NumPy: a user's module may import
    torch and jax both, or torch beside a builtin engine); else its libraries'."""
    found = frameworks(factory, run)
    if "tensorflow" in found:
        return "tensorflow"
    for cls in inspect.getmro(factory) if inspect.isclass(factory) else ():
        module = cls.__module__
        if module.startswith(_BUILTIN):
            return "numpy"
        if module.startswith(_STOCK):  # gradcheck.engines.stock.torch_conv: "torch"
            library = module.removeprefix(_STOCK).split("_")[0]
            return library if library in SPELLINGS else "numpy"
    return spelling(found)


def rule(op: Op, arg: int, spell: str, mode: str = "rev") -> str:
    """`op`'s correct VJP (`mode` "fwd": JVP) for argument `arg`, quoted, in NumPy and (when
    asked, and the op has it) the engine's spelling: "`g * (1 - np.tanh(x)**2)` (in
    PyTorch: `g * (1 - torch.tanh(x)**2)`)"."""
    numpy = op.rule(arg, mode=mode)
    text = f"`{numpy}`"
    if spell in SPELLINGS:
        other = op.rule(arg, spell, mode)
        if other and other != numpy:
            text += f" (in {SPELLINGS[spell]}: `{other}`)"
    return text


def param(op: Op, arg: int) -> str:
    """The name of `op`'s argument `arg` as its rules write it (`a`, `b`, `x`, `values[i]`)."""
    return f"{op.params[0]}[{arg}]" if op.variadic else op.params[arg]
