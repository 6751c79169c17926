"""Mechanism probes of windowed and indexed ops (SPEC §6.1; diagnosis/mechanisms/windows.py).

Each test plants a wrong rule the fault catalogue does not have into the builtin engine (an
engine overriding `vjp_rule` for one op), runs a case through the runner and checks the
`op-vjp` hint at the node: the op, the argument, the mechanism the probes found by running
the rule alone on spike cotangents and designed inputs, and the region where it applies.
The correct engines (builtin, stock torch) get none of these mechanisms on the shipped cases.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from case_files import make_case
from gradcheck.cases import Case, load_file
from gradcheck.diagnosis.localisation.localise import check_nodes
from gradcheck.diagnosis.mechanisms import windows as window_probes
from gradcheck.diagnosis.mechanisms.probes import Prober
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.ops import Op
from gradcheck.ops.conv_geometry import geometry as conv_geometry
from gradcheck.ops.pool_geometry import geometry, windows
from gradcheck.ops.pooling import _scatter, _weights
from gradcheck.ops.registry import VJP
from gradcheck.results import Hint
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parent.parent
WINDOW_MECHANISMS = {"whole-window", "wrong-position", "not-accumulated", "flipped",
                     "shifted", "not-reversed"}  # fmt: skip


def planted(op_name: str, arg: int, rule: Callable[..., VJP]) -> type[BuiltinEngine]:
    """The builtin engine with `op_name`'s VJP for `arg` replaced by `rule(right_rule)`."""

    class Planted(BuiltinEngine):
        name = f"builtin+wrong-{op_name}"

        def vjp_rule(self, op: Op, i: int) -> VJP:
            right = super().vjp_rule(op, i)
            return rule(right) if (op.name, i) == (op_name, arg) else right

    return Planted


def shipped(file: str, name: str) -> Case:
    [found] = [c for c in load_file(ROOT / "cases" / file) if c.name == name]
    return found


def op_hint(engine: type[BuiltinEngine], the_case: Case, op: str) -> Hint:
    [result] = run([the_case], engine, RunOptions()).cases
    assert result.status == "failed", result.message
    assert result.message == ""  # no diagnosis step failed
    hints = [h for h in result.hints if h.code == "op-vjp" and h.op == op]
    assert hints, [(h.code, h.op, h.mechanism) for h in result.hints]
    return hints[0]


def pool_rule(shares: Callable) -> Callable[[VJP], VJP]:
    """A max/avg-pool VJP that adds `shares(g, x, geo, mode)` back where each window sits."""

    def rule(right: VJP) -> VJP:
        def vjp(g, ans, x, ksize, strides, padding, data_format):
            rank = x.ndim - 2
            geo = geometry(x.shape, ksize, strides, padding, data_format, rank)
            return _scatter_shares(shares(g, x, geo), x, geo)

        return vjp

    return rule


def _scatter_shares(shares, x, geo):
    """Each window's shares added back, through the window view (overlaps add)."""
    total = np.zeros(x.shape)
    index = windows(np.arange(x.size).reshape(x.shape).astype(float), geo, -1.0)
    for k in np.ndindex(shares.shape):
        at = int(index[k])
        if at >= 0:
            total.flat[at] += shares[k]
    return total


# -- pools --------------------------------------------------------------------------------


def test_a_max_pool_that_copies_g_to_its_whole_window(tmp_path):
    """g copied to every element of the window, as a max-pool written from an avg-pool."""

    def shares(g, x, geo):
        inside = windows(np.ones(x.shape), geo, 0.0)
        return np.expand_dims(g, (-2, -1)) * inside

    engine = planted("max_pool2d", 0, pool_rule(shares))
    hint = op_hint(engine, shipped("pooling.yaml", "max_pool2d_2x2_stride2"), "max_pool2d")
    assert (hint.node, hint.arg, hint.mechanism) == ("max_pool2d(x, ksize=2)", 0, "whole-window")
    assert hint.confidence == "exact"
    assert "4 elements" in hint.message


def test_a_max_pool_that_sends_g_to_the_transposed_place_in_its_window(tmp_path):
    """The argmax unravelled in the window's transposed shape: (r, c) read as (c, r)."""

    def shares(g, x, geo):
        return np.expand_dims(g, (-2, -1)) * np.swapaxes(_weights(x, "max", geo), -1, -2)

    engine = planted("max_pool2d", 0, pool_rule(shares))
    hint = op_hint(engine, shipped("pooling.yaml", "max_pool2d_2x2_stride2"), "max_pool2d")
    assert (hint.arg, hint.mechanism) == (0, "wrong-position")
    assert "where the window's maximum is x[0, " in hint.message


def test_a_max_pool_whose_overlapping_windows_assign_instead_of_adding():
    """`dx[window][argmax] = g`: an element that is the maximum of several windows keeps
    the last window's gradient only."""

    def rule(right: VJP) -> VJP:
        def vjp(g, ans, x, ksize, strides, padding, data_format):
            geo = geometry(x.shape, ksize, strides, padding, data_format, x.ndim - 2)
            first = _weights(x, "max", geo)
            index = windows(np.arange(x.size).reshape(x.shape).astype(float), geo, -1.0)
            z = np.zeros(x.shape)
            for k in np.ndindex(g.shape):
                z.flat[int(index[k][first[k] == 1][0])] = g[k]
            return z

        return vjp

    engine = planted("max_pool2d", 0, rule)
    hint = op_hint(engine, shipped("pooling.yaml", "max_pool2d_overlapping"), "max_pool2d")
    assert (hint.arg, hint.mechanism, hint.region) == (
        0,
        "not-accumulated",
        "where windows overlap",
    )
    assert "overwrites instead of adding" in hint.message


def test_an_avg_pool_that_divides_by_the_full_window_at_a_same_border():
    def shares(g, x, geo):
        inside = windows(np.ones(x.shape), geo, 0.0)
        return np.expand_dims(g, (-2, -1)) * inside / np.prod(geo.ksize)

    engine = planted("avg_pool2d", 0, pool_rule(shares))
    the_case = shipped("pooling.yaml", "avg_pool2d_same_counts_inbounds")
    found = probed(engine, the_case, "avg_pool2d")
    assert (found.mechanism, found.region) == ("scaled", "at the padded border")
    assert "full window (9)" in found.says
    assert catalogued(engine, the_case) == "fault:avg_pool2d.full-window"


def test_the_pool_shares_helper_is_the_right_vjp_when_nothing_is_wrong():
    """The tests' scatter adds as the builtin rule does (so a planted rule differs only
    where it means to)."""
    x = np.random.default_rng(0).standard_normal((1, 5, 5, 1))
    geo = geometry(x.shape, 3, 1, "VALID", "NHWC", 2)
    g = np.random.default_rng(1).standard_normal((1, 3, 3, 1))
    shares = np.expand_dims(g, (-2, -1)) * _weights(x, "max", geo)
    ours = _scatter_shares(shares, x, geo)
    assert np.allclose(ours, _scatter(g, x, "max", 3, 1, "VALID", "NHWC", 2))


# -- convolutions -------------------------------------------------------------------------


def test_a_conv2d_whose_input_gradient_flips_the_kernel():
    """The input gradient as a true convolution of g with w: the kernel turned round."""

    def rule(right: VJP) -> VJP:
        return lambda g, ans, x, w, **attrs: right(g, ans, x, np.flip(w, (0, 1)), **attrs)

    engine = planted("conv2d", 0, rule)
    the_case = shipped("conv.yaml", "conv2d_valid")
    found = probed(engine, the_case, "conv2d")
    assert found.mechanism == "flipped"
    assert "cross-correlation" in found.says
    assert catalogued(engine, the_case) == "fault:conv2d.kernel-not-flipped"


def test_a_conv2d_whose_filter_gradient_comes_out_in_pytorchs_layout():
    """The filter gradient computed right, then laid out OIHW for an HWIO filter."""

    def rule(right: VJP) -> VJP:
        return lambda g, ans, x, w, **attrs: np.transpose(
            right(g, ans, x, w, **attrs), (3, 2, 0, 1)
        )

    engine = planted("conv2d", 1, rule)
    hint = op_hint(engine, shipped("conv.yaml", "conv2d_valid"), "conv2d")
    assert (hint.arg, hint.mechanism, hint.axes) == (1, "transposed", [3, 2, 0, 1])


def test_a_conv1d_whose_overlapping_windows_assign_instead_of_adding(tmp_path):
    """Each window's share of the input gradient assigned into place, the last one kept."""

    def rule(right: VJP) -> VJP:
        def vjp(g, ans, x, w, **attrs):
            z = np.zeros(x.shape)
            for b, o in np.ndindex(g.shape[:2]):
                z[b, o : o + w.shape[0]] = w @ g[b, o]
            return z

        return vjp

    engine = planted("conv1d", 0, rule)
    the_case = make_case(
        tmp_path, "conv1d(x, w)", {"x": {"shape": [1, 6, 2]}, "w": {"shape": [3, 2, 2]}}
    )
    hint = op_hint(engine, the_case, "conv1d")
    assert (hint.arg, hint.mechanism, hint.region) == (
        0,
        "not-accumulated",
        "where windows overlap",
    )


# -- gathers and pad ----------------------------------------------------------------------


def test_take_along_axis_whose_repeated_indices_overwrite():
    """np.put_along_axis assigns: of two picks of one element, the last one's g is kept."""

    def rule(right: VJP) -> VJP:
        def vjp(g, ans, x, indices, axis):
            z = np.zeros(x.shape)
            np.put_along_axis(z, indices, g, axis)
            return z

        return vjp

    engine = planted("take_along_axis", 0, rule)
    the_case = shipped("gathers.yaml", "take_along_axis_rows")
    found = probed(engine, the_case, "take_along_axis")
    assert (found.mechanism, found.region) == ("not-accumulated", "where an index repeats")
    assert "np.add.at" in found.fix
    assert catalogued(engine, the_case) == "fault:take_along_axis.overwrite"


def test_an_embedding_whose_repeated_ids_overwrite():
    def rule(right: VJP) -> VJP:
        def vjp(g, ans, table, ids):
            z = np.zeros(table.shape)
            z[ids] = g
            return z

        return vjp

    engine = planted("embedding", 0, rule)
    hint = op_hint(engine, shipped("gathers.yaml", "embedding_lookup"), "embedding")
    assert (hint.node, hint.arg) == ("embedding(table, ids)", 0)
    assert (hint.mechanism, hint.region) == ("not-accumulated", "where an index repeats")


def test_a_reflect_pad_that_folds_back_the_pads_before_but_not_after():
    """The mirrored 'after' parts are cropped away instead of added back."""

    def rule(right: VJP) -> VJP:
        def vjp(g, ans, x, paddings, mode, constant_values):
            before = [(b, 0) for b, _ in paddings]
            inner = tuple(slice(0, g.shape[a] - e) for a, (_, e) in enumerate(paddings))
            return right(g[inner], ans, x, before, mode, constant_values)

        return vjp

    engine = planted("pad", 0, rule)
    hint = op_hint(engine, shipped("layout.yaml", "pad_reflect"), "pad")
    assert (hint.arg, hint.mechanism, hint.region) == (
        0,
        "not-accumulated",
        "where the padding mirrors x",
    )
    assert "mirrored parts" in hint.message


# -- roll, cumulative ops, prod -----------------------------------------------------------


def test_a_roll_that_rolls_its_axes_back_in_the_wrong_order(tmp_path):
    """np.roll(g, -shift, reversed(axis)): each axis rolled back by the other's shift."""

    def rule(right: VJP) -> VJP:
        return lambda g, ans, x, shift, axis: np.roll(g, np.negative(shift), axis[::-1])

    engine = planted("roll", 0, rule)
    the_case = make_case(tmp_path, "roll(x, [-1, 2], axis=[0, 2])", {"x": {"shape": [4, 2, 5]}})
    hint = op_hint(engine, the_case, "roll")
    assert (hint.arg, hint.mechanism) == (0, "shifted")
    assert "a spike in g at (0, 0, 0) lands at" in hint.message


def test_a_cumprod_whose_gradient_runs_the_wrong_way(tmp_path):
    """TensorFlow's rule with the sum's direction kept: cumsum(g * y) / x forwards."""

    def rule(right: VJP) -> VJP:
        return lambda g, ans, x, axis, exclusive, reverse: np.cumsum(g * ans, axis) / x

    engine = planted("cumprod", 0, rule)
    the_case = make_case(
        tmp_path, "cumprod(x, axis=1)", {"x": {"shape": [2, 4], "init": "positive"}}
    )
    hint = op_hint(engine, the_case, "cumprod")
    assert (hint.arg, hint.mechanism) == (0, "not-reversed")
    assert hint.confidence == "likely"  # seen on spikes, not recomputed exactly
    assert "at position 0 reaches positions [0, 1, 2, 3], where the right VJP reaches [0]" in (
        hint.message
    )


def test_a_cumsum_whose_gradient_is_the_exclusive_forward_sum(tmp_path):
    def rule(right: VJP) -> VJP:
        return lambda g, ans, x, axis, exclusive, reverse: np.cumsum(g, axis) - g

    engine = planted("cumsum", 0, rule)
    the_case = make_case(tmp_path, "cumsum(x, axis=0)", {"x": {"shape": [5, 2]}})
    hint = op_hint(engine, the_case, "cumsum")
    assert (hint.arg, hint.mechanism, hint.confidence) == (0, "not-reversed", "likely")


def test_a_prod_that_zeroes_its_gradient_at_zeros():
    """`np.where(x == 0, 0, g * y / x)`: guarded against 0 / 0, but the product of the
    others is the gradient there."""

    def rule(right: VJP) -> VJP:
        def vjp(g, ans, x, axis, keepdims):
            full = right(g, ans, x, axis, keepdims)
            return np.where(x == 0, 0.0, full)

        return vjp

    engine = planted("prod", 0, rule)
    hint = op_hint(engine, shipped("products.yaml", "prod_one_zero_and_two_zeros"), "prod")
    assert (hint.arg, hint.mechanism, hint.region) == (0, "zero", "x == 0")


# -- correct engines ----------------------------------------------------------------------

WINDOW_CASES = {
    "conv.yaml": None,
    "pooling.yaml": None,
    "gathers.yaml": None,
    "products.yaml": None,
    "layout.yaml": ("pad_reflect", "pad_symmetric_full_width", "pad_constant_value",
                    "pad_reflect_three_axes", "roll_negative_two_axes", "roll_flattened"),
    "shapes.yaml": ("flip_two_axes",),
}  # fmt: skip


def window_cases() -> list[Case]:
    found = []
    for file, names in WINDOW_CASES.items():
        loaded = [c for c in load_file(ROOT / "cases" / file) if isinstance(c, Case)]
        found += [c for c in loaded if names is None or c.name in names]
    return found


def correct_engines() -> list:
    from gradcheck.engines.loading import load_engine

    return [BuiltinEngine, load_engine("torch")]


@pytest.mark.parametrize("which", [0, 1], ids=["builtin", "torch"])
def test_the_probes_see_nothing_wrong_in_a_correct_engine_at_any_node(which):
    """Each node of the shipped window and index cases, checked alone against a correct
    engine and run through every probe as if it had failed: none claims a mechanism."""
    factory = correct_engines()[which]
    probed = 0
    for the_case in window_cases():
        for check in check_nodes(the_case, factory):
            if check.got is None or check.want is None:
                continue  # an op the engine does not support
            prober = Prober(check)
            for arg in range(len(check.node.args)):
                name = f"a{arg}"
                if name not in check.got.grads or name not in check.want.grads:
                    continue
                want, got = check.want.grads[name], check.got.grads[name]
                for probe in window_probes.PROBES:  # each alone, not only the first to fit
                    found = probe(prober, arg, want, got)
                    assert found is None, (the_case.name, check.node.text, arg, found)
                probed += 1
    assert probed > 40


def test_a_correct_engine_passes_the_window_cases_without_window_mechanisms():
    cases = window_cases()
    result = run(cases, correct_engines()[1], RunOptions())
    assert all(c.status in ("passed", "skipped") for c in result.cases), [
        (c.name, c.status) for c in result.cases if not c.passed
    ]
    mechanisms = {h.mechanism for c in result.cases for h in c.hints}
    assert not mechanisms & WINDOW_MECHANISMS


# -- the probes alone, for the classic variants the catalogue may also name ----------------


def probed(engine: type[BuiltinEngine], the_case: Case, op: str, arg: int = 0):
    """What the window probes make of the case's `op` node, checked alone: they still name
    the bug where a catalogue variant reproduces it (and wins in a run)."""
    [check] = [c for c in check_nodes(the_case, engine) if c.node.op.name == op]
    assert check.result.status == "failed"
    name = f"a{arg}"
    return window_probes.find(Prober(check), arg, check.want.grads[name], check.got.grads[name])


def catalogued(engine: type[BuiltinEngine], the_case: Case) -> str:
    """The code a whole run leads with: the catalogue's variant, where it has this bug."""
    [result] = run([the_case], engine, RunOptions()).cases
    return result.hints[0].mechanism or result.hints[0].code


def test_a_roll_whose_shift_is_not_inverted(tmp_path):
    engine = planted(
        "roll", 0, lambda right: lambda g, ans, x, shift, axis: np.roll(g, shift, axis)
    )
    the_case = make_case(tmp_path, "roll(x, [-1, 2], axis=[0, 2])", {"x": {"shape": [4, 2, 5]}})
    found = probed(engine, the_case, "roll")
    assert (found.mechanism, found.confidence) == ("shifted", "exact")
    assert "the shift is not inverted" in found.says


def test_a_cumsum_run_forwards_is_not_reversed_exactly(tmp_path):
    def rule(right: VJP) -> VJP:
        return lambda g, ans, x, axis, exclusive, reverse: np.cumsum(g, axis)

    the_case = make_case(tmp_path, "cumsum(x, axis=1)", {"x": {"shape": [2, 5]}})
    found = probed(planted("cumsum", 0, rule), the_case, "cumsum")
    assert (found.mechanism, found.confidence) == ("not-reversed", "exact")


def test_a_prod_that_divides_by_x_gives_nan_at_its_zeros():
    """`g * y / x`: 0 / 0 at a zero, where the right gradient is the others' product."""

    def rule(right: VJP) -> VJP:
        def vjp(g, ans, x, axis, keepdims):
            with np.errstate(all="ignore"):
                return g * ans / x  # keepdims=True: g and y in the kept shape

        return vjp

    the_case = shipped("products.yaml", "prod_one_zero_and_two_zeros")
    found = probed(planted("prod", 0, rule), the_case, "prod")
    assert (found.mechanism, found.region) == ("nan-region", "x == 0")


def padded_input_gradient(crop: Callable[[list[tuple[int, int]]], list[int]] | None):
    """conv2d's input gradient through the padded input (VALID on x padded), cropped at the
    offsets `crop(pads)` (None: never cropped)."""

    def rule(right: VJP) -> VJP:
        def vjp(g, ans, x, w, **attrs):
            pads = list(conv_geometry(2, x.shape, w.shape, **attrs).pads)
            full = right(
                g, ans, np.pad(x, [(0, 0), *pads, (0, 0)]), w, **attrs | {"padding": "VALID"}
            )
            if crop is None:
                return full
            (h, v) = crop(pads)
            return full[:, h : h + x.shape[1], v : v + x.shape[2]]

        return vjp

    return rule


def test_a_conv2d_whose_input_gradient_keeps_the_padding():
    engine = planted("conv2d", 0, padded_input_gradient(None))
    the_case = shipped("conv.yaml", "conv2d_same_stride2_even_kernel")
    hint = op_hint(engine, the_case, "conv2d")
    assert (hint.arg, hint.mechanism) == (0, "shape")
    assert "the padding was never cropped" in hint.message


def test_a_conv2d_whose_input_gradient_is_cropped_from_the_pad_after():
    """SAME's odd pad is after; a crop from the larger pad shifts the gradient by one."""
    engine = planted("conv2d", 0, padded_input_gradient(lambda pads: [a for _, a in pads]))
    the_case = shipped("conv.yaml", "conv2d_same_stride2_even_kernel")
    found = probed(engine, the_case, "conv2d")
    assert found.mechanism == "shifted"
    assert (
        "cropped at offsets [0, 2] of the spatial axes, where the pads before them are [0, 1]"
        in found.says
    )
    assert catalogued(engine, the_case) == "fault:conv2d.same-pad-before"
