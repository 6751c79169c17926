"""What `run` does unless told otherwise (SPEC §5): the defaults, then a config file's
values, then the caller's: the command line, the Python API's keywords, the pytest
plugin's options and ini file. One `Settings` for all three, so they cannot drift.

The config file is found from the working directory upward: the first folder with a
``gradcheck.toml`` (its keys at the top level) or a ``pyproject.toml`` that has a
``[tool.gradcheck]`` table (in one folder, ``gradcheck.toml`` wins), up to the project's
root (`ROOT_MARKERS`). A config file naming an engine or ops file runs that code, as
``conftest.py`` does; its other values are untrusted data::

    [tool.gradcheck]
    paths = ["cases"]                  # what `gradcheck run` reads with no paths
    engine = "my_engine.py:Engine"     # as --engine
    ops = ["my_ops.py"]                # as --ops
    rtol = 1e-5                        # as --rtol/--atol: every case's
    atol = 1e-8
    cache = true                       # as --cache/--no-cache
    cache_dir = ".gradcheck_cache"
    reference = "tensorflow"           # tensorflow, numeric or both
    stale_check_limit = 1000000        # 0: every case asks twice
    timeout = 60                       # seconds per case in a worker
    threads = "auto"                   # the worker's and TensorFlow's: auto, off, "1:3"
    max_elements = 10000000

Paths in a config file (paths, ops, cache_dir, an engine file) are relative to the file;
on a command line, to the working directory; in pytest's ini file, to the ini file.
Importing this module imports nothing heavy: the command line reads it before anything.
"""

from __future__ import annotations

import copy
import functools
import os
import reprlib
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .engines.naming import DEFAULT, engine_named, is_file_spec
from .errors import UsageError
from .util.limits import MAX_ELEMENTS, STALE_CHECK_LIMIT, THREADS, TIMEOUT, is_thread_budget

CONFIG_FILES = ("gradcheck.toml", "pyproject.toml")
# What makes a folder a project's root, where the search for a config file stops (as
# pytest's rootdir: https://docs.pytest.org/en/stable/reference/customize.html).
ROOT_MARKERS = ("pyproject.toml", "gradcheck.toml", "setup.cfg", ".git")
MAX_CONFIG_BYTES = 1 << 20
REFERENCES = ("tensorflow", "numeric", "both")


@dataclass(frozen=True)
class Settings:
    paths: tuple[Path, ...] = (Path("cases"),)
    engine: str = "builtin"
    ops: tuple[Path, ...] = ()
    rtol: float | None = None  # None: each case's own tolerance
    atol: float | None = None
    cache: bool = True
    cache_dir: Path = Path(".gradcheck_cache")
    reference: str = "tensorflow"  # where a case names none
    stale_check_limit: int = STALE_CHECK_LIMIT  # input elements; 0: every case asks twice
    timeout: float = TIMEOUT
    max_elements: int = MAX_ELEMENTS
    threads: str = THREADS  # while the engine's worker and TensorFlow both run (`runner.threads`)
    # Where each value not the default came from, for reports: "pyproject.toml", "--engine".
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    config: str | None = field(default=None, compare=False)  # the config file read, if any

    def source(self, key: str) -> str:
        return self.sources.get(key, DEFAULT)

    def engine_named(self) -> str:
        """How errors name the engine: ``--engine x.py``, ``engine 'x.py' (from ...)``."""
        return engine_named(self.engine, self.source("engine"))

    def run_options(self, engine: Any = None, *, read_only: bool = False, **options: Any) -> Any:
        """The runner's `RunOptions` for these settings; `options` are the rest of them
        (strict, fail_fast, diagnose, require_cache, isolate: None for the engine's default;
        engine_origin, for an engine that is no setting)."""
        from .runner import RunOptions, default_isolation

        return RunOptions(
            cache=self.reference_cache(read_only=read_only),
            stale_check_limit=self.stale_check_limit or None,
            reference=self.reference,
            timeout=self.timeout,
            threads=self.threads,
            **{
                "engine_origin": self.source("engine"),
                "config": self.config,
                **options,
                "isolate": options.get("isolate") or default_isolation(engine),
            },
        )

    def reference_cache(self, *, read_only: bool = False) -> Any:
        return reference_cache(self.cache_dir if self.cache else None, read_only=read_only)


DEFAULTS = Settings()


def reference_cache(directory: str | os.PathLike[str] | None, *, read_only: bool = False) -> Any:
    """The reference cache in `directory` (absolute: an engine running in this process may
    change the working directory), or None; `read_only` for --require-cache."""
    if directory is None:
        return None
    from .references.cache import ReferenceCache

    return ReferenceCache(Path(os.path.abspath(directory)), read_only=read_only)


KEYS = tuple(f.name for f in fields(Settings) if f.name not in ("sources", "config"))


@dataclass(frozen=True)
class Layer:
    """Values one source sets (None: not set): `source` names it in reports and messages
    (a function of the key: the command line says ``--engine``), `base` is the folder its
    relative paths start from (None: the working directory, left as given)."""

    values: Mapping[str, Any]
    source: Callable[[str], str]
    base: Path | None = None
    file: str | None = None  # the config file these values were read from, as shown


def resolve(*layers: Layer | None) -> Settings:
    """Each key from the first layer that sets it, else `DEFAULTS`."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for layer in reversed([layer for layer in layers if layer is not None]):
        for key, raw in layer.values.items():
            if raw is None:
                continue
            if key not in KEYS:
                raise UsageError(f"{layer.source(key)}: unknown key {key!r}{_did_you_mean(key)}")
            values[key] = _checked(key, raw, layer)
            sources[key] = layer.source(key)
    sources = {key: source for key, source in sources.items() if source != DEFAULT}
    config = next((layer.file for layer in layers if layer is not None and layer.file), None)
    return replace(DEFAULTS, **values, sources=sources, config=config)


def settings(given: Mapping[str, Any], label: Callable[[str], str]) -> Settings:
    """The settings of a call that sets `given` itself (relative paths as given, so
    relative to the working directory), over the config file's and the defaults; with a
    config file, the default paths (``cases``, the cache) are in its folder."""
    found = config_layer()
    return resolve(Layer(given, label), found, found and defaults_at(found.base))


def defaults_at(base: Path | None) -> Layer:
    """The default paths, in `base`: the folder a project's config file is in."""
    return Layer({"paths": DEFAULTS.paths, "cache_dir": DEFAULTS.cache_dir}, _default, base)


def _default(key: str) -> str:
    return DEFAULT


def option_name(key: str) -> str:
    """The command line's name of a key: ``--stale-check-limit``."""
    return "the command line" if key == "paths" else f"--{key.replace('_', '-')}"


def config_layer(start: Path | None = None) -> Layer | None:
    """The nearest config file's values, from `start` (the working directory) upward to
    the project's root: as pytest's rootdir, the first folder with a `ROOT_MARKERS` entry
    (a config file in a folder above the project is no part of it, and may run code)."""
    folder = Path(os.path.abspath(start or os.getcwd()))
    for here in (folder, *folder.parents):
        for name in CONFIG_FILES:
            path = here / name
            values = _read(path)
            if values is not None:
                shown = os.path.relpath(path)  # `../pyproject.toml` in reports
                return Layer(values, lambda key, shown=shown: shown, base=here, file=shown)
        if any(os.path.lexists(here / marker) for marker in ROOT_MARKERS):
            return None
    return None


def _read(path: Path) -> dict[str, Any] | None:
    """The gradcheck table of `path`, or None when there is none (or no such file)."""
    text = _text(path)
    if text is None:
        return None
    table = _table(text, path)
    return copy.deepcopy(table)  # the caller's own: the parsed one is kept for the next call


@functools.lru_cache(maxsize=8)
def _table(text: str, path: Path) -> dict[str, Any] | None:
    """`_read`'s table of a file's text, parsed once per text: the API's calls read the
    config file each time, and parsing a large pyproject.toml is what that costs."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        table: Any = tomllib.loads(text)
    except ValueError as e:
        raise UsageError(f"{_shown(path)}: not a valid TOML file: {e}") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        raise UsageError(f"{_shown(path)}: not a TOML file gradcheck reads: too deep") from None
    if path.name == "pyproject.toml":
        tool = table.get("tool", {})
        if not isinstance(tool, dict):
            raise UsageError(f"{_shown(path)}: 'tool' must be a table, not {_brief(tool)}")
        table = tool.get("gradcheck")
        if table is None:
            return None
    if not isinstance(table, dict):
        raise UsageError(f"{_shown(path)}: [tool.gradcheck] must be a table, not {_brief(table)}")
    return table


def _text(path: Path) -> str | None:
    """`path`'s text, None when there is no such file; a FIFO, device or folder is refused
    (opened without blocking, so a FIFO never waits for a writer), as is a file over
    `MAX_CONFIG_BYTES`: a config file is small, and a value read from it is untrusted."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        if not os.path.lexists(path) or isinstance(e, NotADirectoryError):
            return None
        raise UsageError(f"{_shown(path)}: cannot be read: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{_shown(path)}: not a regular file, not read")
    with os.fdopen(fd, "rb") as file:
        data = file.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise UsageError(f"{_shown(path)}: over {MAX_CONFIG_BYTES:,} bytes, not read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{_shown(path)}: not a valid TOML file: not UTF-8 ({e.reason})") from None


def _brief(value: Any) -> str:
    """A value for a message: its repr, cut short (a config's value may be huge)."""
    shown = reprlib.Repr()  # its limits are attributes before Python 3.12
    shown.maxlevel, shown.maxstring, shown.maxother = 3, 60, 60
    return shown.repr(value)


def _checked(key: str, raw: Any, layer: Layer) -> Any:
    """`raw` as the settings hold it, its paths made relative to `layer.base`."""
    where = layer.source(key)
    if where.endswith((".toml", "the command line")):  # a file's key; else an option's name
        where = f"{where}: {key}"

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise UsageError(f"{where} must be {what}, not {_brief(raw)}")

    number = isinstance(raw, (int, float)) and not isinstance(raw, bool)
    if key in ("paths", "ops"):
        items = [raw] if isinstance(raw, (str, os.PathLike)) else raw
        need(isinstance(items, (list, tuple)), "a path or a list of paths")
        need(all(isinstance(p, (str, os.PathLike)) for p in items), "a list of paths")
        return tuple(_rebase(Path(p), layer.base) for p in items)
    if key == "cache_dir":
        need(isinstance(raw, (str, os.PathLike)), "a path")
        return _rebase(Path(raw), layer.base)
    if key == "engine":
        need(isinstance(raw, str) and raw != "", "an --engine spec (a string)")
        target, colon, name = raw.partition(":")
        return f"{_rebase(Path(target), layer.base)}{colon}{name}" if is_file_spec(target) else raw
    if key == "reference":
        need(raw in REFERENCES, " or ".join(REFERENCES))
        return raw
    if key == "cache":
        need(isinstance(raw, bool), "true or false")
        return raw
    if key == "threads":
        need(is_thread_budget(raw), 'auto, off or "REF:ENGINE" (e.g. "1:3")')
        return raw
    if key in ("rtol", "atol"):
        need(number and 0 <= raw < float("inf"), "a finite number >= 0")
        return float(raw)
    if key == "timeout":
        need(number and 0 < raw < float("inf"), "a number of seconds > 0")
        return float(raw)
    low = 0 if key == "stale_check_limit" else 1
    whole = isinstance(raw, int) and not isinstance(raw, bool)
    need(whole and raw >= low, f"a whole number >= {low}")
    return raw


def _rebase(path: Path, base: Path | None) -> Path:
    """`path` from `base`: relative to the working directory when it is inside it."""
    if base is None or path.is_absolute():
        return path
    return Path(_shown(base / path))


def _shown(path: Path) -> str:
    cwd = os.getcwd()
    absolute = os.path.abspath(path)
    if absolute == cwd:
        return "."
    return absolute[len(cwd) + 1 :] if absolute.startswith(cwd + os.sep) else absolute


def _did_you_mean(key: str) -> str:
    import difflib

    close = difflib.get_close_matches(key, KEYS, n=1)
    known = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{known}; the keys are {', '.join(KEYS)}"
