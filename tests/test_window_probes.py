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
import yaml

from gradcheck.cases import Case, load_file
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.ops import Op
from gradcheck.ops.pooling import _scatter, _weights, geometry, windows
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


def case(tmp_path: Path, expr: str, inputs: dict) -> Case:
    path = tmp_path / "case.yaml"
    spec = {"name": "probe", "expr": expr, "inputs": inputs, "cotangent": "random",
            "dtype": "float64"}  # fmt: skip
    path.write_text(yaml.safe_dump({"cases": [spec]}, sort_keys=False))
    [loaded] = load_file(path)
    assert isinstance(loaded, Case), loaded
    return loaded


def shipped(file: str, name: str) -> Case:
    [found] = [c for c in load_file(ROOT / "cases" / file) if c.name == name]
    return found


def op_hint(engine: type[BuiltinEngine], the_case: Case, op: str) -> Hint:
    [result] = run([the_case], engine, RunOptions()).cases
    assert result.status == "failed", result.message
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
    assert "maximum is element" in hint.message


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
    hint = op_hint(engine, shipped("pooling.yaml", "avg_pool2d_same_counts_inbounds"), "avg_pool2d")
    assert (hint.arg, hint.mechanism, hint.region) == (0, "scaled", "at the padded border")
    assert "full window (9)" in hint.message


def test_the_pool_shares_helper_is_the_right_vjp_when_nothing_is_wrong():
    """The tests' scatter adds as the builtin rule does (so a planted rule differs only
    where it means to)."""
    x = np.random.default_rng(0).standard_normal((1, 5, 5, 1))
    geo = geometry(x.shape, 3, 1, "VALID", "NHWC", 2)
    g = np.random.default_rng(1).standard_normal((1, 3, 3, 1))
    shares = np.expand_dims(g, (-2, -1)) * _weights(x, "max", geo)
    ours = _scatter_shares(shares, x, geo)
    assert np.allclose(ours, _scatter(g, x, "max", 3, 1, "VALID", "NHWC", 2))
