"""Import a user's Python code (an engine adapter, an ops file) as Python would run it.

A file is imported with its own folder first on `sys.path`, as ``python file.py`` has
it, so an engine split over two files imports its sibling; a module name is looked up
on Python's path and then in the working directory, as ``python -m`` has it. Either
folder stays at the end of `sys.path` afterwards, for imports inside the engine's
methods, where it can shadow nothing. An import that fails shows the user's frames
only, the file and line of the failure first.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from ..errors import UsageError

_PACKAGE_DIR = str(Path(__file__).resolve().parent) + os.sep
_IMPORTLIB_DIR = os.path.dirname(importlib.__file__) + os.sep  # as its frames name it


def import_file(path: Path, named: str, *, prefix: str) -> ModuleType:
    """Run the file at `path` as a fresh module; a `UsageError` if it fails, whose message
    calls it `named` (``--engine my_engine.py``).

    The module is keyed by the resolved path, so two files of the same name never clash,
    and it is put in `sys.modules`, where dataclasses and pickling look modules up.
    """
    if not path.is_file():
        raise UsageError(f"{named}: no such file")
    name = f"{prefix}_{path.stem}_{abs(hash(str(path.resolve()))):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{named}: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _importing(path.resolve().parent, first=True):
            spec.loader.exec_module(module)
    except UsageError:
        sys.modules.pop(name, None)
        raise
    except Exception as e:
        sys.modules.pop(name, None)
        raise UsageError(import_failure(e, named)) from e
    return module


def import_module(name: str, named: str) -> ModuleType:
    """`importlib.import_module(name)`, trying the working directory after Python's path;
    a `UsageError` calling it `named` if it fails."""
    try:
        with _importing(Path.cwd(), first=False):
            return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(f"{e.name}.")):
            raise UsageError(
                f"{named}: cannot import module {name!r}: {e} (looked up on Python's path "
                f"and in the working directory, {Path.cwd()})"
            ) from e
        raise UsageError(import_failure(e, named)) from e
    except Exception as e:
        raise UsageError(import_failure(e, named)) from e


def import_failure(error: BaseException, what: str) -> str:
    """Why `what` could not be imported: where it failed and the error on the first line
    (``my_engine.py:3: ModuleNotFoundError: ...``), then the user's frames of it."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not _ours(f.filename)]
    frames = [f for f in frames if "site-packages" not in f.filename] or frames
    if isinstance(error, SyntaxError) and error.filename:
        where = f"{_shown(error.filename)}:{error.lineno}: "
    elif frames:
        where = f"{_shown(frames[-1].filename)}:{frames[-1].lineno}: "
    else:
        where = ""
    message = "".join(traceback.format_exception_only(type(error), error)).rstrip().split("\n")
    if isinstance(error, SyntaxError):  # its source line and caret, then `SyntaxError: ...`
        head, rest = message[-1], [line for line in message[:-1] if not line.startswith("  File ")]
    else:  # `Error: message`, then its notes, if any
        head, rest = message[0], message[1:]
    lines = [f"{where}{head}", f"({what} could not be imported)"]
    lines += [line.rstrip() for line in traceback.format_list(frames)]
    return "\n".join(line for line in [*lines, *rest] if line)


@contextlib.contextmanager
def _importing(folder: Path, *, first: bool) -> Iterator[None]:
    """`folder` on `sys.path` while importing: first (a file's own folder, whose
    modules win) or last (the working directory: an installed package of the same name
    wins); at the end afterwards."""
    from .stderr import quiet_import

    entry = str(folder)
    if first or entry not in sys.path:
        sys.path.insert(0, entry) if first else sys.path.append(entry)
    try:
        with quiet_import():  # a file that imports TensorFlow would print its log noise
            yield
    finally:
        if first and sys.path[:1] == [entry]:  # unless the user's code moved it
            del sys.path[0]
        if entry not in sys.path:
            sys.path.append(entry)


def _ours(filename: str) -> bool:
    """gradcheck's frames and importlib's (`<frozen importlib._bootstrap>`, and
    `importlib/__init__.py`, which `import_module` calls through)."""
    return filename.startswith((_PACKAGE_DIR, _IMPORTLIB_DIR, "<frozen "))


def _shown(filename: str) -> str:
    """`filename` relative to the working directory when it is inside it."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return filename


def local_imports(path: Path) -> set[Path]:
    """`path` and the Python files beside it that it imports, transitively (found in its
    source, not run): an engine's own modules (a package's through its folder), not the
    libraries it uses. A worker is stamped with them; `run --watch` watches them."""
    found: set[Path] = set()
    todo = [path]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.add(current)
        try:
            tree = ast.parse(current.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue  # the round says what is wrong with it
        for node in ast.walk(tree):
            for base, name in _imported(node, current, path.parent):
                todo += _module_files(base, name)
    return found


def _imported(node: ast.AST, current: Path, root: Path) -> Iterator[tuple[Path, str]]:
    if isinstance(node, ast.Import):
        yield from ((root, alias.name) for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = current.parent if node.level else root
        for _ in range(max(node.level - 1, 0)):
            base = base.parent
        module = node.module or ""
        yield base, module
        for alias in node.names:  # `from pkg import module`
            yield base, f"{module}.{alias.name}" if module else alias.name


def _module_files(base: Path, dotted: str) -> list[Path]:
    """The files importing `dotted` from `base` runs that exist: each package's __init__."""
    files, folder = [], base
    for part in filter(None, dotted.split(".")):
        folder = folder / part
        for candidate in (folder.with_suffix(".py"), folder / "__init__.py"):
            if candidate.is_file():
                files.append(candidate.resolve())
    return files
