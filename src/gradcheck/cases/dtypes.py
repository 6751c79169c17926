"""A case's dtypes: their NumPy dtypes, default tolerances and machine epsilons."""

from __future__ import annotations

from ..util.lazy_numpy import np

# Per-dtype default tolerances, as torch.testing.assert_close uses: (rtol, atol).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


DTYPES = tuple(DEFAULT_TOLERANCES)

# An input's own dtype when it holds indices, labels or ids (SPEC §3.1): never
# differentiated, never perturbed, given to engines through `constant()` as it is.
INTEGER_DTYPES = ("int32", "int64")


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
    """The spacing of floats of `dtype` at 1. NumPy's own floats' from NumPy: importing
    ml_dtypes, whose `finfo` also knows bfloat16, takes seconds, so only bfloat16 pays it."""
    dtype = numpy_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)
    if dtype.kind == "f":
        return float(np.finfo(dtype).eps)
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps)


def is_integer(array: np.ndarray) -> bool:
    """Whether `array` is an integer input's (indices, labels): kept as it is wherever
    the float arrays of a case are widened or rounded."""
    return array.dtype.kind in "iu"


def widened(array: np.ndarray) -> np.ndarray:
    """`array` in float64, for the exact answer; an integer input's as it is."""
    return array if is_integer(array) else np.asarray(array, np.float64)
