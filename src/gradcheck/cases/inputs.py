"""A case's arrays, kept as specs and drawn when the case first needs them: random
inputs, reproducible bit for bit from (seed, input name) on any machine, and the arrays
a case gives (`Given`). Reading a case builds no array.

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
  exact zeros and ties, to exercise kinks and ``max``/``min`` conventions. With an
  integer ``dtype`` (int32, int64) the input is an integer one: indices, labels, ids.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from ..util.lazy_numpy import np
from .dtypes import INTEGER_DTYPES, numpy_dtype

INITS = ("normal", "uniform", "positive", "integers")
_RANGES = {"uniform": (-1.0, 1.0), "positive": (0.5, 2.0), "integers": (-3, 3)}
# The random cotangent's stream name: not an identifier, so no input can share it.
_COTANGENT_STREAM = "@cotangent"
# Below this many elements in a case's random arrays, threads cost more than they save.
PARALLEL_DRAW_ELEMENTS = 1_000_000
K = TypeVar("K")


def stable_seed(text: str) -> int:
    """A 63-bit integer from `text`: the same on every run, machine and Python."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


@dataclass(frozen=True)
class RandomSpec:
    """A random input (or cotangent), checked on creation (`ValueError` for a bad init or
    range) and drawn later, so that `draw_all` can draw a case's arrays together."""

    seed: int
    name: str
    shape: tuple[int, ...]
    init: str = "normal"
    low: float | None = None
    high: float | None = None
    dtype: str = "float64"

    def __post_init__(self) -> None:
        if self.init not in INITS:
            raise ValueError(f"unknown init {self.init!r} (allowed: {', '.join(INITS)})")
        if self.init == "normal" and (self.low is not None or self.high is not None):
            raise ValueError("init normal takes no low/high (it is mean 0, std 1); use uniform")
        if self.init != "normal":
            _range(self.init, self.low, self.high)
        if self.dtype in INTEGER_DTYPES:
            if self.init != "integers":
                raise ValueError(f"dtype {self.dtype} takes init integers, not {self.init}")
            lo, hi = _range(self.init, self.low, self.high)
            bits = int(self.dtype[3:]) - 1
            if not (-(2**bits) <= lo and hi < 2**bits):
                raise ValueError(f"low and high must fit in {self.dtype}, got {lo:g}, {hi:g}")

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def bounds(self) -> tuple[float, float]:
        """The [low, high] it draws from, defaults filled in (not for init normal)."""
        return _range(self.init, self.low, self.high)

    def draw(self) -> np.ndarray:
        seeds = np.random.SeedSequence([self.seed, stable_seed(self.name)])
        rng = np.random.Generator(np.random.PCG64(seeds))
        if self.init == "normal":
            values = rng.standard_normal(self.shape)
        elif self.init == "integers":
            lo, hi = _range(self.init, self.low, self.high)
            values = rng.integers(int(lo), int(hi), size=self.shape, endpoint=True)
            if self.dtype not in INTEGER_DTYPES:  # the float case's whole numbers
                values = values.astype(np.float64)
        else:
            # What `rng.uniform(lo, hi)` computes, lo + (hi - lo) * random(), in place and
            # without its per-element broadcasting: the same bits, in three fast passes.
            lo, hi = _range(self.init, self.low, self.high)
            values = rng.random(self.shape)
            values *= hi - lo
            values += lo
        return values.astype(numpy_dtype(self.dtype), copy=False)


@dataclass(frozen=True)
class Given:
    """An array the case gives: a literal's numbers (flat, in C order), an array passed
    to `load_case`, or one number for every element (a cotangent of ones).
    Drawn, as a `RandomSpec` is, as an array of the case's dtype."""

    shape: tuple[int, ...]
    values: tuple[float, ...] | tuple[int, ...] | float | np.ndarray
    dtype: str = "float64"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def draw(self) -> np.ndarray:
        dtype = numpy_dtype(self.dtype)
        if isinstance(self.values, float):
            return np.full(self.shape, self.values, dtype)
        exact = np.int64 if self.dtype in INTEGER_DTYPES else np.float64  # ints beyond 2**53
        return np.asarray(self.values, exact).reshape(self.shape).astype(dtype)


# An array, or a spec it is drawn from. A string, so that NumPy is not looked up for it.
Source: TypeAlias = "np.ndarray | RandomSpec | Given"


def integer_dtype(source: Source) -> str | None:
    """The integer dtype of an integer input's source (SPEC §3.1); None for a float one."""
    dtype = source.dtype if isinstance(source, (RandomSpec, Given)) else source.dtype.name
    return dtype if dtype in INTEGER_DTYPES else None


def draw_all(values: Mapping[K, Source]) -> dict[K, np.ndarray]:
    """`values` with every spec drawn. A large case's random arrays are drawn on threads
    (NumPy's generators let go of the GIL while they fill an array); each comes from its
    own stream, so the numbers are the same as when drawn one after another."""
    specs = {key: v for key, v in values.items() if isinstance(v, (RandomSpec, Given))}
    if len(specs) > 1 and sum(spec.size for spec in specs.values()) >= PARALLEL_DRAW_ELEMENTS:
        from concurrent.futures import ThreadPoolExecutor  # and logging: not for small cases

        with ThreadPoolExecutor(min(len(specs), os.cpu_count() or 1)) as pool:
            drawn = dict(
                zip(specs, pool.map(lambda spec: spec.draw(), specs.values()), strict=True)
            )
    else:
        drawn = {key: spec.draw() for key, spec in specs.items()}
    return {key: drawn.get(key, v) for key, v in values.items()}


def cotangent_spec(seed: int, shape: Sequence[int], dtype: str = "float64") -> RandomSpec:
    """A standard normal cotangent, from the case seed's own cotangent stream."""
    return RandomSpec(seed, _COTANGENT_STREAM, tuple(shape), "normal", dtype=dtype)


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
        if not (lo >= -(2**63) and hi < 2**63):
            raise ValueError(f"init integers: low and high must fit in 64 bits, got {lo}, {hi}")
    elif lo >= hi:
        raise ValueError(f"init {init}: low {lo} must be below high {hi}")
    elif not math.isfinite(hi - lo):
        raise ValueError(f"init {init}: the range from {lo} to {hi} is too wide to draw from")
    if init == "positive" and lo <= 0:
        raise ValueError(f"init positive: low must be above 0, got {lo}; use uniform")
    return lo, hi


def tangents(seed: int, inputs: Mapping[str, np.ndarray], names: Sequence[str]) -> dict:
    """Forward mode's tangent of each input in `names`: standard normal, in the input's
    shape and dtype, from a stream of its own (``@tangent:<name>``), as the cotangent."""
    return _directions(seed, inputs, names, "@tangent")


def directions(seed: int, inputs: Mapping[str, np.ndarray], names: Sequence[str]) -> dict:
    """Second order's direction ``v`` of each input in `names` (``@direction:<name>``)."""
    return _directions(seed, inputs, names, "@direction")


def _directions(
    seed: int, inputs: Mapping[str, np.ndarray], names: Sequence[str], stream: str
) -> dict[str, np.ndarray]:
    return draw_all(
        {
            name: RandomSpec(
                seed, f"{stream}:{name}", inputs[name].shape, dtype=inputs[name].dtype.name
            )
            for name in names
        }
    )
