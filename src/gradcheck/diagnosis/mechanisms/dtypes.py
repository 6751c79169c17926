"""Precision: differences that are rounding, judged in the dtype the engine computed in.

An engine that returns float32 on a float64 case rounds at float32's epsilon, and its
differences from the reference are that rounding, not a bug: they are judged by the
engine's dtype, and the hint names the cause in the engine's own library.
"""

from __future__ import annotations

import numpy as np

from ...cases.dtypes import machine_epsilon

ULPS = 16  # differences within this many units in the last place are rounding

# How each library ends up in float32, and what to write instead.
_CAUSES = {
    "jax": "JAX computes in float32 unless 64-bit mode is on: "
    "`jax.config.update('jax_enable_x64', True)` before creating arrays",
    "torch": "PyTorch's default dtype is float32: keep the input's dtype "
    "(`torch.from_numpy(value)`, `torch.as_tensor(value)`) or "
    "`torch.set_default_dtype(torch.float64)`",
    "tensorflow": "TensorFlow makes float32 tensors from Python floats: "
    "`tf.constant(value, dtype=value.dtype)`, and no `0.0` starting value for a gradient",
}
_NUMPY_CAUSE = (
    "an array is created or cast in float32 somewhere (`np.float32`, `astype`, "
    "`dtype=np.float32`): keep the input's dtype (`np.asarray(value)`)"
)


def lower_precision(engine: str | None, case: str) -> bool:
    """Did the engine return a float dtype less precise than the case's?"""
    return engine is not None and machine_epsilon(engine) > machine_epsilon(case)


def judging_dtype(engine: str | None, case: str) -> str:
    """The dtype whose rounding the differences are judged by: the less precise one."""
    return engine if lower_precision(engine, case) else case


def within_rounding(want: np.ndarray, got: np.ndarray, dtype: str) -> tuple[bool, float]:
    """Are all differences within `ULPS` of `dtype` at the array's scale? (and the worst)"""
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    if want.shape != got.shape:
        return False, float("inf")
    finite = np.isfinite(want) & np.isfinite(got)
    # A NaN/Inf pattern that differs is no rounding.
    if not np.array_equal(want[~finite], got[~finite], equal_nan=True):
        return False, float("inf")
    scale = max(float(np.max(np.abs(want[finite]), initial=0.0)), 1.0)
    worst = float(np.max(np.abs(got[finite] - want[finite]), initial=0.0))
    return worst <= ULPS * machine_epsilon(dtype) * scale, worst


def cause(engine_dtype: str, case_dtype: str, frameworks: frozenset[str]) -> tuple[str, str]:
    """What happens (the engine computes in `engine_dtype`), and how that comes about and
    is mended, in the engine's own library's terms."""
    what = f"the engine returns {engine_dtype} on a {case_dtype} case: it computes in "
    what += engine_dtype
    for library in ("jax", "torch", "tensorflow"):
        if library in frameworks:
            return what, _CAUSES[library]
    return what, _NUMPY_CAUSE
