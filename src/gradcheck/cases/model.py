"""What a case file becomes once it is loaded and validated."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..expression import Expression

# Per-dtype default tolerances, as torch.testing.assert_close uses: (rtol, atol).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}
DTYPES = tuple(DEFAULT_TOLERANCES)
# Judged by their distance from a float64 answer for the same rounded inputs, next to
# TensorFlow's own (comparison/compare.py), unless the case sets a tolerance.
LOW_PRECISION = ("float16", "bfloat16")


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype for a case dtype; bfloat16 comes from ml_dtypes (a TensorFlow dependency)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def machine_epsilon(dtype: np.dtype | str) -> float:
    """The spacing of floats of `dtype` at 1; `ml_dtypes.finfo` also knows bfloat16."""
    import ml_dtypes

    return float(ml_dtypes.finfo(numpy_dtype(dtype) if isinstance(dtype, str) else dtype).eps)


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    @classmethod
    def for_dtype(cls, dtype: str) -> Tolerance:
        rtol, atol = DEFAULT_TOLERANCES[dtype]
        return cls(rtol, atol)


@dataclass
class Case:
    """A valid case: its expression is parsed and shape-checked, its inputs resolved."""

    name: str
    file: str
    line: int
    expr: str
    expression: Expression
    inputs: dict[str, np.ndarray]
    wrt: list[str]
    dtype: str
    cotangent: np.ndarray
    tolerance: Tolerance
    seed: int
    tolerance_given: bool = False  # set in the case file or on the command line
    expect: dict[str, np.ndarray] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    description: str | None = None
    reference: str | None = None  # tensorflow | numeric | both; None: the run's --reference

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class InvalidCase:
    """A case (or a whole file) that could not be loaded; `message` says what to change."""

    name: str
    file: str
    line: int
    message: str
    expr: str = ""

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"
