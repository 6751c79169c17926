"""Compare an engine's array with the reference's under SPEC §2's tolerance rule.

An element passes iff ``abs(got - want) <= atol + rtol * abs(want)``; NaN equals only NaN
at the same place, and an infinity only the same infinity.

Arrays keep their own dtype until here and are compared in float64, elementwise, without
a full-size float64 copy of either: on large cases these passes are most of gradcheck's
own cost, so the common cases take as few as they can.
"""

from __future__ import annotations

import numpy as np

from ..cases.model import Tolerance
from ..results import Comparison


def close_mask(want: np.ndarray, got: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    """Elementwise pass/fail for arrays of one shape."""
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (want == got) | (np.isnan(want) & np.isnan(got))
        # `isfinite`: else rtol * inf would let any number, even -inf, match an infinity.
        within = np.isfinite(want) & (
            np.abs(got - want) <= tolerance.atol + tolerance.rtol * np.abs(want)
        )
    return same | within


def compare(want: np.ndarray, got: np.ndarray, tolerance: Tolerance) -> Comparison:
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return _result(want, got, max_abs_diff=None, max_rel_diff=None, mismatched=want.size)
    if np.array_equal(want, got):  # bit-for-bit answers (the stale check's usual case)
        return _result(want, got, max_abs_diff=0.0, max_rel_diff=0.0, mismatched=0)
    # 1-D views, so that a 0-d array's results are arrays too (in-place steps below).
    flat_want, flat_got = want.reshape(-1), got.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(np.subtract(flat_got, flat_want, dtype=np.float64))
    if not diff.size:
        return _result(want, got, max_abs_diff=0.0, max_rel_diff=0.0, mismatched=0)
    worst = int(np.argmax(diff))  # a NaN, if there is one
    if not np.isfinite(diff[worst]):
        return _compare_non_finite(want, got, tolerance)
    # Every element of both is a finite number: the rule is one comparison each.
    bound = np.abs(flat_want, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = diff / bound  # 0/0 is NaN where both are 0, and fmax skips NaN
    max_rel = float(np.fmax.reduce(rel, initial=0.0))
    del rel
    bound *= tolerance.rtol
    bound += tolerance.atol
    return _result(
        want,
        got,
        max_abs_diff=float(diff[worst]),
        max_rel_diff=max_rel,
        mismatched=diff.size - int(np.count_nonzero(diff <= bound)),
        worst_index=tuple(int(i) for i in np.unravel_index(worst, want.shape)),
    )


def _compare_non_finite(want: np.ndarray, got: np.ndarray, tolerance: Tolerance) -> Comparison:
    """The full rule, for arrays holding a NaN or an infinity somewhere."""
    ok = close_mask(want, got, tolerance)
    want64, got64 = np.asarray(want, np.float64), np.asarray(got, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.where(ok & ~np.isfinite(got64 - want64), 0.0, np.abs(got64 - want64))
        diff = np.where(np.isnan(diff), np.inf, diff)  # NaN against a number: infinitely off
        rel = np.where(diff == 0, 0.0, diff / np.abs(want64))
        rel = np.where(np.isnan(rel), np.inf, rel)  # a number against a NaN reference
    worst = np.unravel_index(np.argmax(diff), diff.shape)
    return _result(
        want,
        got,
        max_abs_diff=float(diff.max()),
        max_rel_diff=float(rel.max()),
        mismatched=int(np.count_nonzero(~ok)),
        worst_index=tuple(int(i) for i in worst),
    )


def _result(want: np.ndarray, got: np.ndarray, mismatched: int, **fields) -> Comparison:
    return Comparison(
        "passed" if mismatched == 0 else "failed",
        reference_shape=want.shape,
        engine_shape=got.shape,
        mismatched=mismatched,
        size=want.size,
        reference=want,
        engine=got,
        **fields,
    )
