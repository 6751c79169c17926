"""How messages and reports name an engine and where it was set: ``--engine x.py``,
``engine 'x.py' (from pyproject.toml)``."""

from __future__ import annotations

DEFAULT = "default"  # the source of a value nobody set (`config.DEFAULT`)


def origin_note(source: str) -> str:
    """How a report says where a value came from: "(from pyproject.toml)", "(default)"."""
    return "(default)" if source == DEFAULT else f"(from {source})"


def engine_label(engine: str, origin: str | None) -> str:
    """How a report's header names the engine: ``engine my-engine (from pyproject.toml)``
    (`origin` None: not said)."""
    return f"engine {engine} {origin_note(origin)}" if origin else f"engine {engine}"


def config_label(config: str | None) -> str:
    """How a header says which config file the settings came from: a config file names
    code that runs (its engine, its ops files), so every run says which one it read."""
    return f"config {config}" if config else "no config file"


def engine_named(spec: str, source: str) -> str:
    """How a message names the engine `spec` that `source` set: as the option was typed
    (``--engine x.py``), else with where it was set (``engine 'x.py' (from pyproject.toml)``)."""
    if source.startswith("-"):
        return f"{source} {spec}"
    return f"engine {spec!r} {origin_note(source)}"


def is_file_spec(target: str) -> bool:
    """Whether an --engine spec's target (before `:`) names a file, not a module."""
    return target.endswith(".py") or "/" in target or "\\" in target
