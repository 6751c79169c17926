"""Resolve `--engine`: `builtin`, `path/to/file.py[:Class]` or `package.module[:Class]`."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from ..errors import UsageError
from ..ops.conventions import check_declared
from ..util.modules import import_file, import_module
from .builtin.engine import BuiltinEngine
from .driver import engine_text
from .naming import engine_named, is_file_spec
from .protocol import FRAMEWORK_DRIVERS, EngineFactory, framework_driver, missing_methods

DEFAULT_CLASS = "Engine"
# The ready adapters: `--engine NAME` -> (module:class, what to install for it).
STOCK = {
    "torch": ("gradcheck.engines.stock.torch:TorchEngine", "gradcheck[torch]"),
    "jax": ("gradcheck.engines.stock.jax:JaxEngine", "gradcheck[jax]"),
    "autograd": ("gradcheck.engines.stock.autograd:AutogradEngine", "gradcheck[autograd]"),
    "tensorflow": ("gradcheck.engines.stock.tensorflow:TensorFlowAdapter", "gradcheck[tensorflow]"),
}
_FILE_PREFIX = "gradcheck_engine"  # an engine file is imported as gradcheck_engine_<stem>_<hash>


def load_engine(spec: str, named: str | None = None) -> EngineFactory:
    """The engine class `spec` names; each call of it makes the fresh instance a case gets.
    Errors call it `named` (`config.engine_named`: where it was set), else ``--engine``."""
    if spec == "builtin":
        return BuiltinEngine
    named = named or engine_named(spec, "--engine")
    if spec in STOCK:
        target, extra = STOCK[spec]
        module, _, class_name = target.partition(":")
        try:
            return getattr(import_module(module, named), class_name)
        except UsageError as e:
            why = str(e).removeprefix(f"{named}: ")  # named once is enough
            raise UsageError(f"{named} needs `pip install '{extra}'`: {why}") from None
    target, _, class_name = spec.partition(":")
    class_name = class_name or DEFAULT_CLASS
    module = (
        import_file(Path(target), named, prefix=_FILE_PREFIX)
        if is_file_spec(target)
        else import_module(target, named)
    )
    engine = getattr(module, class_name, None)
    if not inspect.isclass(engine):
        classes = [
            n
            for n, v in vars(module).items()
            if inspect.isclass(v) and v.__module__ == module.__name__
        ]
        raise UsageError(
            f"{named}: {target} has no class {class_name!r} "
            f"(classes there: {', '.join(classes) or 'none'}); name one as {target}:ClassName"
        )
    for method in missing_methods(engine):
        raise UsageError(
            f"{named}: {class_name} has no {method}() method (an adapter "
            "implements leaf, value and grad; a functional engine implements vjp() instead; "
            "`gradcheck init-engine` writes one)"
        )
    driver = getattr(engine, "driver", None)
    if driver is not None and framework_driver(engine) is None:
        known = ", ".join(f'"{d}"' for d in sorted(FRAMEWORK_DRIVERS))
        raise UsageError(f"{named}: {class_name}.driver = {driver!r}: gradcheck knows {known}")
    if getattr(engine, "conventions", None):
        try:
            check_declared(engine.conventions)
        except ValueError as e:
            raise UsageError(f"{named}: {class_name}.{e}") from None
    return engine


ENGINE_NAME_CHARS = 200


def engine_name(factory: EngineFactory) -> str:
    """The engine's `name` (its class's name else), as reports can show it whatever it is."""
    try:
        name = str(getattr(factory, "name", None) or getattr(factory, "__name__", "engine"))
    except Exception:  # a `name` that cannot say what it is
        return "engine"
    return engine_text(name, ENGINE_NAME_CHARS)


def engine_spec(factory: EngineFactory) -> str | None:
    """The ``--engine`` spec that loads `factory` in another process, or None when it
    cannot be named: a class defined in ``__main__`` or a function, a lambda, an instance."""
    if factory is BuiltinEngine:
        return "builtin"
    if not inspect.isclass(factory) or "." in factory.__qualname__:
        return None
    module = sys.modules.get(factory.__module__)
    file = getattr(module, "__file__", None)
    if factory.__module__.startswith(f"{_FILE_PREFIX}_") and file:
        return f"{Path(file).resolve()}:{factory.__qualname__}"
    if factory.__module__ in ("__main__", "__mp_main__") or module is None:
        return None
    return f"{factory.__module__}:{factory.__qualname__}"
