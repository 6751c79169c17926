"""Random inputs, reproducible bit for bit from (seed, input name) on any machine.

Every input draws from its own stream, a PCG64 generator seeded with
``SeedSequence([seed, stable_seed(name)])``: adding, removing or reordering inputs
never changes another input's values, and nothing depends on Python's per-process
``hash()``. Values are drawn in float64 and then cast, so a float32 case sees the
float64 case's numbers, rounded. (NumPy keeps these streams stable; its policy allows
a change to a distribution's algorithm in a new NumPy version, announced as such.)

The inits:

* ``normal``: mean 0, standard deviation 1. It takes no ``low``/``high``; use
  ``uniform`` for a bounded range.
* ``uniform``: uniform in [low, high), by default [-1, 1).
* ``positive``: uniform in [low, high) with 0 < low, by default [0.5, 2): safe bases
  for ``log``, ``sqrt`` and ``pow``, away from their steep region near 0.
* ``integers``: whole numbers in [low, high] inclusive, by default [-3, 3], as floats:
  exact zeros and ties, to exercise kinks and ``max``/``min`` conventions.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from .model import numpy_dtype

INITS = ("normal", "uniform", "positive", "integers")
_RANGES = {"uniform": (-1.0, 1.0), "positive": (0.5, 2.0), "integers": (-3, 3)}
# The random cotangent's stream name: not an identifier, so no input can share it.
_COTANGENT_STREAM = "@cotangent"


def stable_seed(text: str) -> int:
    """A 63-bit integer from `text`: the same on every run, machine and Python."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def random_input(
    seed: int,
    name: str,
    shape: Sequence[int],
    init: str = "normal",
    low: float | None = None,
    high: float | None = None,
    dtype: str = "float64",
) -> np.ndarray:
    """Input `name`'s values, drawn from its own stream; `ValueError` for a bad init or range."""
    if init not in INITS:
        raise ValueError(f"unknown init {init!r} (allowed: {', '.join(INITS)})")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stable_seed(name)])))
    shape = tuple(shape)
    if init == "normal":
        if low is not None or high is not None:
            raise ValueError("init normal takes no low/high (it is mean 0, std 1); use uniform")
        values = rng.standard_normal(shape)
    elif init == "integers":
        lo, hi = _range(init, low, high)
        values = rng.integers(int(lo), int(hi), size=shape, endpoint=True).astype(np.float64)
    else:
        values = rng.uniform(*_range(init, low, high), size=shape)
    return values.astype(numpy_dtype(dtype))


def random_cotangent(seed: int, shape: Sequence[int], dtype: str = "float64") -> np.ndarray:
    """A standard normal cotangent from the case seed's own cotangent stream."""
    return random_input(seed, _COTANGENT_STREAM, shape, "normal", dtype=dtype)


def _range(init: str, low: float | None, high: float | None) -> tuple[float, float]:
    """`init`'s [low, high], each bound defaulting on its own; checked before drawing."""
    default_low, default_high = _RANGES[init]
    lo = default_low if low is None else low
    hi = default_high if high is None else high
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"init {init}: low and high must be finite, got {lo} and {hi}")
    if init == "integers":
        if not (float(lo).is_integer() and float(hi).is_integer()):
            raise ValueError(f"init integers: low and high must be whole numbers, got {lo}, {hi}")
        if lo > hi:
            raise ValueError(f"init integers: low {lo} is above high {hi}")
    elif lo >= hi:
        raise ValueError(f"init {init}: low {lo} must be below high {hi}")
    if init == "positive" and lo <= 0:
        raise ValueError(f"init positive: low must be above 0, got {lo}; use uniform")
    return lo, hi
