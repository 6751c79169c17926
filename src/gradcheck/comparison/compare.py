"""Compare an engine's array with the reference's under SPEC §2's tolerance rule.

An element passes iff ``abs(got - want) <= atol + rtol * abs(want)``; NaN equals only NaN
at the same place, and an infinity only the same infinity.

Arrays keep their own dtype until here and are compared in float64, elementwise, without
a full-size float64 copy of either: on large cases these passes are most of gradcheck's
own cost, so the common cases take as few as they can.

Low precision (float16, bfloat16): two engines that round at every op, each its own way,
disagree by more than ``rtol * abs(want)`` on small elements however right both are. So
a float64 answer for the same rounded inputs (`exact`) may be given, and an element then
also passes when the engine is no further from it than `ERROR_FACTOR` times the
reference's own worst error on that array (at least ``rtol`` times its largest value;
plus ``atol``): an engine is judged by how far it is from the exact answer, next to how
far the reference itself is.
"""

from __future__ import annotations

import numpy as np

from ..cases.model import Tolerance
from ..results import Comparison

CHUNK = 1 << 15  # elements compared per step: three float64 buffers of 256 KiB
# Low precision: an engine passes where it is within this many times the reference's own
# worst error of the exact answer (see the module docstring).
ERROR_FACTOR = 4.0


def close_mask(
    want: np.ndarray, got: np.ndarray, tolerance: Tolerance, exact: np.ndarray | None = None
) -> np.ndarray:
    """Elementwise pass/fail for arrays of one shape."""
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (want == got) | (np.isnan(want) & np.isnan(got))
        # `isfinite`: else rtol * inf would let any number, even -inf, match an infinity.
        within = np.isfinite(want) & (
            np.abs(got - want) <= tolerance.atol + tolerance.rtol * np.abs(want)
        )
    ok = same | within
    if exact is not None and exact.shape == want.shape:
        ok |= _near_exact(want, got, np.asarray(exact, np.float64), tolerance)
    return ok


def _near_exact(
    want: np.ndarray, got: np.ndarray, exact: np.ndarray, tolerance: Tolerance
) -> np.ndarray:
    """Where `got` is no further from `exact` than the reference's own error allows. That
    error is taken as at least `rtol` (the dtype's, as this rule is for cases without a
    tolerance of their own) times the array's largest value: on a few elements the
    reference may round luckily, and one rounding of that size is always possible."""
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(want - exact)
        worst = float(np.max(error, where=np.isfinite(error), initial=0.0))
        scale = float(np.max(np.abs(exact), where=np.isfinite(exact), initial=0.0))
        worst = max(worst, tolerance.rtol * scale)
        return np.abs(got - exact) <= ERROR_FACTOR * worst + tolerance.atol


def compare(
    want: np.ndarray, got: np.ndarray, tolerance: Tolerance, exact: np.ndarray | None = None
) -> Comparison:
    """`got` against `want`; `exact`, a float64 answer, for low-precision judgement."""
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return _result(
            want, got, tolerance, max_abs_diff=None, max_rel_diff=None, mismatched=want.size
        )
    if np.array_equal(want, got):  # bit-for-bit answers (the stale check's usual case)
        return _result(want, got, tolerance, max_abs_diff=0.0, max_rel_diff=0.0, mismatched=0)
    finite = _compare_finite(want.reshape(-1), got.reshape(-1), tolerance)
    if finite is None:
        return _compare_non_finite(want, got, tolerance, exact)
    max_abs, worst, max_rel, mismatched = finite
    if mismatched and exact is not None:
        mismatched = int(np.count_nonzero(~close_mask(want, got, tolerance, exact)))
    return _result(
        want,
        got,
        tolerance,
        max_abs_diff=max_abs,
        max_rel_diff=max_rel,
        mismatched=mismatched,
        worst=worst,
    )


def _compare_finite(
    want: np.ndarray, got: np.ndarray, tolerance: Tolerance
) -> tuple[float, int, float, int] | None:
    """(max abs diff, its flat index, max rel diff, mismatched) of two 1-D arrays, or None
    when an element of either is not a finite number.

    A chunk at a time, into buffers reused from chunk to chunk: the float64
    temporaries stay in cache instead of each being a fresh array as large as the input.
    """
    max_abs, worst, max_rel, mismatched = 0.0, 0, 0.0, 0
    buffers = np.empty((3, min(want.size, CHUNK)))
    for start in range(0, want.size, CHUNK):
        w, g = want[start : start + CHUNK], got[start : start + CHUNK]
        diff, abs_want, work = buffers[:, : w.size]
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            np.subtract(g, w, out=diff, dtype=np.float64)
            np.abs(diff, out=diff)
            i = int(np.argmax(diff))  # a NaN, if there is one
            if not np.isfinite(diff[i]):
                return None
            if diff[i] > max_abs:
                max_abs, worst = float(diff[i]), start + i
            np.abs(w, out=abs_want, dtype=np.float64)
            np.divide(diff, abs_want, out=work)  # 0/0 is NaN where both are 0: fmax skips it
            max_rel = max(max_rel, float(np.fmax.reduce(work, initial=0.0)))
        bound = np.multiply(abs_want, tolerance.rtol, out=work)
        bound += tolerance.atol
        mismatched += w.size - int(np.count_nonzero(diff <= bound))
    return max_abs, worst, max_rel, mismatched


def _compare_non_finite(
    want: np.ndarray, got: np.ndarray, tolerance: Tolerance, exact: np.ndarray | None
) -> Comparison:
    """The full rule, for arrays holding a NaN or an infinity somewhere."""
    ok = close_mask(want, got, tolerance, exact)
    want64 = np.asarray(want, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        signed = np.asarray(got, np.float64) - want64
        diff = np.where(ok & ~np.isfinite(signed), 0.0, np.abs(signed))
        diff = np.where(np.isnan(diff), np.inf, diff)  # NaN against a number: infinitely off
        rel = np.where(diff == 0, 0.0, diff / np.abs(want64))
        rel = np.where(np.isnan(rel), np.inf, rel)  # a number against a NaN reference
    return _result(
        want,
        got,
        tolerance,
        max_abs_diff=float(diff.max()),
        max_rel_diff=float(rel.max()),
        mismatched=int(np.count_nonzero(~ok)),
        worst=int(np.argmax(diff)),
    )


def _result(
    want: np.ndarray,
    got: np.ndarray,
    tolerance: Tolerance,
    mismatched: int,
    worst: int | None = None,
    **fields,
) -> Comparison:
    """The comparison; `worst` is the flat index of the largest difference."""
    return Comparison(
        "passed" if mismatched == 0 else "failed",
        reference_shape=want.shape,
        engine_shape=got.shape,
        mismatched=mismatched,
        size=want.size,
        worst_index=None
        if worst is None
        else tuple(int(i) for i in np.unravel_index(worst, want.shape)),
        reference=want,
        engine=got,
        rtol=tolerance.rtol,
        atol=tolerance.atol,
        **fields,
    )
