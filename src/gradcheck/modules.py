"""Import a user's Python file (an engine adapter, an ops file) as a module of its own."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .errors import UsageError


def import_file(path: Path, option: str, *, prefix: str) -> ModuleType:
    """Run the file at `path` as a fresh module; `UsageError` (naming `option`) if it fails.

    The module is keyed by the resolved path, so two files of the same name never clash,
    and it is put in `sys.modules`, where dataclasses and pickling look modules up.
    """
    from .engines.driver import traceback_tail
    from .engines.tensorflow import quiet_import

    if not path.is_file():
        raise UsageError(f"{option}: no such file {path}")
    name = f"{prefix}_{path.stem}_{abs(hash(str(path.resolve()))):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{option}: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with quiet_import():  # a file that imports TensorFlow would print its log noise
            spec.loader.exec_module(module)
    except UsageError:
        sys.modules.pop(name, None)
        raise
    except Exception as e:
        sys.modules.pop(name, None)
        raise UsageError(f"{option}: importing {path} failed:\n{traceback_tail(e)}") from e
    return module
