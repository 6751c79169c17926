"""Compare an engine's array with the reference's under SPEC §2's tolerance rule.

An element passes iff ``abs(got - want) <= atol + rtol * abs(want)``; NaN equals only NaN
at the same place, and an infinity only the same infinity.
"""

from __future__ import annotations

import numpy as np

from ..cases.model import Tolerance
from ..results import Comparison


def close_mask(want: np.ndarray, got: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    """Elementwise pass/fail for arrays of one shape."""
    with np.errstate(invalid="ignore"):
        same = (want == got) | (np.isnan(want) & np.isnan(got))
        # `isfinite`: else rtol * inf would let any number, even -inf, match an infinity.
        within = np.isfinite(want) & (
            np.abs(got - want) <= tolerance.atol + tolerance.rtol * np.abs(want)
        )
    return same | within


def compare(want: np.ndarray, got: np.ndarray, tolerance: Tolerance) -> Comparison:
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    shapes = {"reference_shape": want.shape, "engine_shape": got.shape}
    if want.shape != got.shape:
        return Comparison(
            "failed",
            **shapes,
            max_abs_diff=None,
            max_rel_diff=None,
            mismatched=want.size,
            size=want.size,
            reference=want,
            engine=got,
        )
    if np.array_equal(want, got, equal_nan=True):  # the common case, in one pass
        return Comparison(
            "passed",
            **shapes,
            max_abs_diff=0.0,
            max_rel_diff=0.0,
            mismatched=0,
            size=want.size,
            reference=want,
            engine=got,
        )
    ok = close_mask(want, got, tolerance)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.where(ok & ~np.isfinite(got - want), 0.0, np.abs(got - want))
        diff = np.where(np.isnan(diff), np.inf, diff)  # NaN against a number: infinitely off
        rel = np.where(diff == 0, 0.0, diff / np.abs(want))
        rel = np.where(np.isnan(rel), np.inf, rel)  # a number against a NaN reference
    mismatched = int(np.count_nonzero(~ok))
    worst = (
        tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape)) if diff.size else None
    )
    return Comparison(
        "passed" if mismatched == 0 else "failed",
        **shapes,
        max_abs_diff=float(diff.max()) if diff.size else 0.0,
        max_rel_diff=float(rel.max()) if rel.size else 0.0,
        mismatched=mismatched,
        size=want.size,
        worst_index=worst,
        reference=want,
        engine=got,
    )
