"""SPEC §2's comparison rule at its edges, and `expect` pinning TensorFlow's answers."""

from __future__ import annotations

import numpy as np
import pytest

import engines_for_tests as E
import gradcheck.comparison.compare as compare_module
from gradcheck.cases.model import Tolerance
from gradcheck.comparison.compare import close_mask, compare
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.runner import run

NAN, INF = np.nan, np.inf
TOL = Tolerance(rtol=0.5, atol=0.25)  # powers of two: the bound below is exact


def check(want, got, tolerance=TOL):
    return compare(np.asarray(want, float), np.asarray(got, float), tolerance)


# -- the tolerance rule: abs(got - want) <= atol + rtol * abs(want) -------------------------


@pytest.mark.parametrize("want", [2.0, -2.0])
def test_exactly_at_the_bound_passes_just_above_fails(want):
    bound = TOL.atol + TOL.rtol * abs(want)  # 1.25, exact in binary
    for edge in (want + bound, want - bound):
        assert check([want], [edge]).passed
        outward = np.sign(edge - want)
        result = check([want], [edge + outward * 1e-12])
        assert not result.passed and result.mismatched == 1
    # On the far side (|got| > |want|) one ulp beyond the bound already fails.
    far = want + np.sign(want) * bound
    assert not check([want], [np.nextafter(far, np.sign(want) * np.inf)]).passed


def test_rtol_scales_with_the_reference_not_the_engine():
    tolerance = Tolerance(rtol=1.0, atol=0.0)
    assert not check([1.0], [3.0], tolerance).passed  # 2 > 1 * |want|
    assert check([3.0], [1.0], tolerance).passed  # 2 <= 1 * |want|


def test_atol_alone_at_zero_reference():
    tolerance = Tolerance(rtol=1e-7, atol=1e-7)
    assert check([0.0], [1e-7], tolerance).passed
    assert not check([0.0], [2e-7], tolerance).passed


def test_default_tolerances_follow_torch_assert_close():
    assert Tolerance.for_dtype("float64") == Tolerance(1e-7, 1e-7)
    assert Tolerance.for_dtype("float32") == Tolerance(1.3e-6, 1e-5)
    assert Tolerance.for_dtype("float16") == Tolerance(1e-3, 1e-5)
    assert Tolerance.for_dtype("bfloat16") == Tolerance(1.6e-2, 1e-5)


# -- NaN and infinity -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("want", "got", "passed"),
    [
        ([NAN, 1.0], [NAN, 1.0], True),  # NaN equals NaN at the same place
        ([NAN, 1.0], [1.0, NAN], False),  # not elsewhere
        ([NAN], [1.0], False),
        ([1.0], [NAN], False),
        ([INF, -INF], [INF, -INF], True),
        ([INF], [-INF], False),
        ([-INF], [INF], False),
        ([INF], [1e300], False),  # rtol * inf must not swallow every number
        ([1e300], [INF], False),
        ([INF], [NAN], False),
    ],
)
def test_nan_and_inf(want, got, passed):
    result = check(want, got)
    assert result.passed is passed
    if not passed:
        assert result.max_abs_diff == INF
        assert result.max_rel_diff == INF  # a number, never NaN, so reports can show it
    else:
        assert result.max_abs_diff == 0.0 and result.max_rel_diff == 0.0


def test_nan_in_different_places_counts_both():
    result = check([NAN, 1.0, 2.0], [1.0, NAN, 2.0])
    assert result.mismatched == 2 and result.size == 3


# -- shapes, the worst element, counts ------------------------------------------------


def test_shape_mismatch_fails_without_a_difference():
    result = check(np.ones((2, 3)), np.ones((3, 2)))
    assert result.status == "failed"
    assert result.max_abs_diff is None and result.max_rel_diff is None
    assert result.reference_shape == (2, 3) and result.engine_shape == (3, 2)
    assert result.mismatched == 6 and result.size == 6
    assert result.worst_index is None


def test_broadcastable_shapes_still_mismatch():
    result = check(np.ones((3,)), np.ones((2, 3)))
    assert not result.passed and result.max_abs_diff is None


def test_worst_index_max_diffs_and_count():
    want = np.arange(1.0, 13.0).reshape(3, 4)
    got = want.copy()
    got[0, 1] += 0.5  # want 2:  diff 0.5 <= 0.25 + 0.5 * 2  = 1.25, passes
    got[1, 1] -= 8.0  # want 6:  diff 8   >  0.25 + 0.5 * 6  = 3.25, fails: the worst
    got[2, 0] += 5.0  # want 9:  diff 5   >  0.25 + 0.5 * 9  = 4.75, fails
    got[2, 3] += 6.0  # want 12: diff 6   <= 0.25 + 0.5 * 12 = 6.25, passes
    result = check(want, got)
    assert result.status == "failed"
    assert result.mismatched == 2 and result.size == 12
    assert result.worst_index == (1, 1)
    assert result.max_abs_diff == 8.0
    assert result.max_rel_diff == pytest.approx(8.0 / 6.0)


def test_equal_arrays_pass_with_zero_difference():
    want = np.random.default_rng(0).normal(size=(2, 2, 3))
    result = check(want, want.copy(), Tolerance(0.0, 0.0))
    assert result.passed and result.mismatched == 0 and result.max_abs_diff == 0.0


def test_scalars_compare():
    assert check(2.0, 2.0).passed
    result = check(2.0, 4.0)
    assert not result.passed and result.worst_index == () and result.size == 1


def test_a_nan_in_a_later_chunk_takes_the_full_rule(monkeypatch):
    monkeypatch.setattr(compare_module, "CHUNK", 4)
    want = np.arange(1.0, 11.0)
    got = want.copy()
    got[9] = NAN
    result = check(want, got)
    assert result.mismatched == 1 and result.max_abs_diff == INF and result.worst_index == (9,)


def test_empty_arrays_pass():
    result = check(np.ones((0, 3)), np.ones((0, 3)))
    assert result.passed and result.size == 0 and result.max_abs_diff == 0.0


def test_relative_difference_at_a_zero_reference():
    result = check([0.0, 0.0, 4.0], [0.0, 1.0, 4.5])
    assert result.max_rel_diff == INF  # a difference where the reference is 0
    assert result.mismatched == 1 and result.worst_index == (1,)
    result = check([0.0, 4.0], [0.0, 4.5])  # 0 against 0 is no relative difference
    assert result.max_rel_diff == pytest.approx(0.125)


def test_float32_arrays_are_compared_in_float64():
    # 2**25 - 1 needs 25 bits: float32 arithmetic would round the difference to 2**25.
    want, got = np.array([2.0**25], np.float32), np.array([1.0], np.float32)
    result = compare(want, got, Tolerance(rtol=0.0, atol=0.0))
    assert result.max_abs_diff == 2.0**25 - 1
    assert result.max_rel_diff == (2.0**25 - 1) / 2.0**25  # float32 would make it 1.0
    assert result.reference.dtype == np.float32  # kept as the engines gave them


@pytest.mark.parametrize("chunk", [8, 1 << 15])
@pytest.mark.parametrize("seed", range(5))
def test_finite_arrays_agree_with_the_elementwise_rule(seed, chunk, monkeypatch):
    """The finite arrays' shortcut, a chunk at a time, counts exactly what `close_mask`
    (the rule) rejects, and finds the first worst element whichever chunk holds it."""
    monkeypatch.setattr(compare_module, "CHUNK", chunk)
    rng = np.random.default_rng(seed)
    want = rng.normal(size=(7, 9)).astype(np.float32)
    want[rng.random(want.shape) < 0.1] = 0.0
    got = want + rng.normal(scale=0.3, size=want.shape).astype(np.float32)
    exact = rng.random(want.shape) < 0.3
    got[exact] = want[exact]
    result = compare(want, got, TOL)
    ok = close_mask(want, got, TOL)
    assert result.mismatched == np.count_nonzero(~ok)
    diff = np.abs(got.astype(np.float64) - want)
    assert result.max_abs_diff == diff.max()
    assert result.worst_index == np.unravel_index(np.argmax(diff), diff.shape)


# -- expect: the pinned gradients guard the oracle ------------------------------------

EXPECT = """\
    cases:
      - name: pinned_right
        expr: x * y
        inputs: {{x: [1.0, 2.0], y: [3.0, 4.0]}}
        expect: {{x: [3.0, 4.0], y: [1.0, 2.0]}}
      - name: pinned_wrong
        expr: x * y
        inputs: {{x: [1.0, 2.0], y: [3.0, 4.0]}}
        expect: {{x: [3.0, {wrong}], y: [1.0, 2.0]}}
"""


def test_expect_that_agrees_with_tensorflow_passes_and_one_that_does_not_fails(tmp_path):
    cases = E.load_cases(tmp_path, EXPECT.format(wrong=4.5))
    right, wrong = run(cases, BuiltinEngine).cases
    assert right.status == "passed", right.message
    assert wrong.status == "failed"
    assert "no longer matches the pinned `expect`" in wrong.message
    assert "gradient for x" in wrong.message and "gradient for y" not in wrong.message
    # The engine itself agrees with TensorFlow: only the pin is wrong.
    assert all(i.comparison.passed for i in wrong.inputs)


def test_expect_within_tolerance_passes(tmp_path):
    cases = E.load_cases(tmp_path, EXPECT.format(wrong=4.00000001))
    assert [c.status for c in run(cases, BuiltinEngine).cases] == ["passed", "passed"]
