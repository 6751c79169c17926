"""gradcheck: check any autodiff engine's gradients against TensorFlow and explain mismatches.

The Python API (`gradcheck.api`): `check` one expression, `run` case files, `fuzz` an
engine; `gradcheck.torch.check` and `gradcheck.jax.check` a framework's function, traced.
User-defined ops (`gradcheck.ops.user`): `op` declares one, `Op`/`register_op` are the
long form, `load_ops_files` loads ops files. Importing the package is cheap:
NumPy, the runner and TensorFlow are imported on first use.
"""

from typing import Any

__version__ = "0.1.0"

from .api import (
    CheckResult,
    FoundCase,
    FuzzReport,
    InputCheck,
    InvalidCaseError,
    RunReport,
    check,
    fuzz,
    run,
)
from .errors import GradcheckError

# The op declaration's public names, imported on first use (they bring NumPy in).
_OPS_API = {
    "Interval": "registry",
    "Op": "registry",
    "ShapeError": "registry",
    "broadcast_shapes": "broadcast",
    "OpDeclarationError": "user",
    "load_ops_files": "user",
    "op": "user",
    "register_op": "user",
    "same_shape": "user",
}

__all__ = [
    "CheckResult",
    "FoundCase",
    "FuzzReport",
    "GradcheckError",
    "InputCheck",
    "InvalidCaseError",
    "RunReport",
    "__version__",
    "check",
    "fuzz",
    "run",
    *_OPS_API,
]


def __getattr__(name: str) -> Any:
    if name in ("torch", "jax"):  # gradcheck.torch.check(fn, x): imports the framework
        from importlib import import_module

        return import_module(f"gradcheck.{name}")
    if name in _OPS_API:
        from importlib import import_module

        return getattr(import_module(f"gradcheck.ops.{_OPS_API[name]}"), name)
    raise AttributeError(f"module 'gradcheck' has no attribute {name!r}")
