"""The `engine=` of the API's calls: an ``--engine`` spec, which is a setting (the config
file may give it), or an engine object (a class, a zero-argument factory), which is the
caller's: checked here, and named in the case files `fuzz` writes by the file that
defines it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from ..config import Settings

EngineSpec = str | type | Callable[[], Any]
KEYWORD = "engine="  # where an engine object came from, as reports say it


def chosen_engine(engine: EngineSpec | None, settings: Settings) -> tuple[Any, str]:
    """The engine a call runs, and where it was set: a spec is a setting (the keyword's,
    else the config file's, else builtin); an engine object is the caller's."""
    if engine is None or isinstance(engine, str):
        return settings.engine, settings.source("engine")
    return checked_engine(engine), KEYWORD


def factory_of(engine: Any, settings: Settings) -> Callable[[], Any]:
    """`chosen_engine`'s engine as a factory in this process (`fuzz` runs it here)."""
    if isinstance(engine, str):
        from ..engines.loading import load_engine

        return load_engine(engine, settings.engine_named())
    return engine


def checked_engine(engine: type | Callable[[], Any]) -> Callable[[], Any]:
    """An engine object, checked: a class with the protocol's methods, or a factory."""
    from ..engines.protocol import missing_methods

    if inspect.isclass(engine):
        for method in missing_methods(engine):
            raise UsageError(
                f"engine {engine.__name__} has no {method}() method; an engine needs "
                "leaf, value and grad (or vjp, if functional), and one method per op it supports"
            )
        return engine
    if callable(engine) and missing_methods(engine):
        return engine
    raise UsageError(
        f"engine must be 'builtin', an --engine spec ('path/file.py:Class' or "
        f"'package.module:Class'), an engine class or a zero-argument factory, not "
        f"{type(engine).__name__}"
        + ("" if missing_methods(engine) else ": pass the class, every case needs a fresh instance")
    )


def spec_of(engine: Any) -> str | None:
    """How a case file's reproduce command names `engine`: its spec, or for a class the
    file it is defined in; None for the builtin engine (or a factory: no file to name)."""
    if isinstance(engine, str):
        return None if engine == "builtin" else engine
    try:
        file = inspect.getsourcefile(engine) if inspect.isclass(engine) else None
    except TypeError:  # a class defined in C, or in no file
        file = None
    return f"{relative(file)}:{engine.__name__}" if file else None


def relative(file: str) -> str:
    """`file` relative to the working folder when it is inside it."""
    try:
        return str(Path(file).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return file
