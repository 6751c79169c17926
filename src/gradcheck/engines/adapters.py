"""Resolve `--engine`: `builtin`, `path/to/file.py[:Class]` or `package.module[:Class]`."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .builtin import BuiltinEngine
from .driver import traceback_tail
from .protocol import EngineFactory
from .tensorflow import quiet_import

DEFAULT_CLASS = "Engine"


def load_engine(spec: str) -> EngineFactory:
    """The engine class `spec` names; each call of it makes the fresh instance a case gets."""
    if spec == "builtin":
        return BuiltinEngine
    target, _, class_name = spec.partition(":")
    class_name = class_name or DEFAULT_CLASS
    module = _load_file(Path(target)) if _is_path(target) else _load_module(target)
    engine = getattr(module, class_name, None)
    if not inspect.isclass(engine):
        classes = [
            n
            for n, v in vars(module).items()
            if inspect.isclass(v) and v.__module__ == module.__name__
        ]
        raise UsageError(
            f"--engine {spec}: {target} has no class {class_name!r} "
            f"(classes there: {', '.join(classes) or 'none'}); name one as {target}:ClassName"
        )
    for method in ("leaf", "value", "grad"):
        if not callable(getattr(engine, method, None)):
            raise UsageError(f"--engine {spec}: {class_name} has no {method}() method (SPEC §4)")
    return engine


def engine_name(factory: EngineFactory) -> str:
    return str(getattr(factory, "name", None) or getattr(factory, "__name__", "engine"))


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or "\\" in target


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise UsageError(f"--engine: no such file {path}")
    # Keyed by the resolved path, so two engine files of the same name never clash.
    name = f"gradcheck_engine_{path.stem}_{abs(hash(str(path.resolve()))):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"--engine: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    try:
        with quiet_import():  # an engine that imports TensorFlow would print its log noise
            spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(name, None)
        raise UsageError(f"--engine: importing {path} failed:\n{traceback_tail(e)}") from e
    return module


def _load_module(name: str) -> Any:
    try:
        with quiet_import():
            return importlib.import_module(name)
    except ImportError as e:
        raise UsageError(f"--engine: cannot import module {name!r}: {e}") from e
    except Exception as e:
        raise UsageError(f"--engine: importing {name} failed:\n{traceback_tail(e)}") from e
