"""gradcheck: check any autodiff engine's gradients against TensorFlow and explain mismatches.

The Python API (`gradcheck.api`): `check` one expression, `run` case files. Importing
the package is cheap: NumPy, the runner and TensorFlow are imported on first use.
"""

__version__ = "0.1.0"

from .api import CheckResult, InputCheck, InvalidCaseError, RunReport, check, run
from .errors import GradcheckError

__all__ = [
    "CheckResult",
    "GradcheckError",
    "InputCheck",
    "InvalidCaseError",
    "RunReport",
    "__version__",
    "check",
    "run",
]
