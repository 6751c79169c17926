"""The builtin engine: deep graphs, fan-out, unbroadcasting, intermediate and unconnected wrt.

Checked against TensorFlow (through the runner, as users run it, or through the
`TensorFlowEngine` reference directly) and against central finite differences in float64.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from engines_for_tests import load_cases
from gradcheck.engines.builtin.engine import BuiltinEngine, Tensor, topological_order
from gradcheck.engines.reverse import run_engine
from gradcheck.ops.broadcast import unbroadcast
from gradcheck.references.tensorflow import TensorFlowEngine
from gradcheck.runner import run

RNG = np.random.default_rng(20240601)


def central_difference(f, arrays: list[np.ndarray], eps: float = 1e-6) -> list[np.ndarray]:
    """d f(*arrays) / d arrays[i], elementwise, by central differences (float64)."""
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for index in np.ndindex(a.shape):
            plus = [b.copy() for b in arrays]
            minus = [b.copy() for b in arrays]
            plus[i][index] += eps
            minus[i][index] -= eps
            g[index] = (f(*plus) - f(*minus)) / (2 * eps)
        grads.append(g)
    return grads


def by_name(result) -> dict:
    return {item.name: item.comparison for item in result.inputs}


# -- depth: the traversal is iterative -----------------------------------------------


def test_chain_of_5000_ops_differentiates_without_recursion():
    assert sys.getrecursionlimit() < 5000  # a recursive traversal would hit the limit
    engine = BuiltinEngine()
    x0 = np.array([0.5, -1.0, 2.0])
    x = engine.leaf("x", x0)
    c = engine.constant(np.array(1.0001))
    y = x
    for _ in range(5000):
        y = engine.mul(y, c)

    assert len(topological_order(y)) == 5002  # x, c and the 5000 products, each once
    (gx,) = engine.grad(y, [x], np.ones(3))
    np.testing.assert_allclose(engine.value(y), x0 * 1.0001**5000, rtol=1e-9)
    np.testing.assert_allclose(gx, np.full(3, 1.0001**5000), rtol=1e-9)


def test_chain_of_5000_uses_of_one_leaf_accumulates_every_share():
    engine = BuiltinEngine()
    x0 = np.array([[1.5, -2.0]])
    x = engine.leaf("x", x0)
    y = x
    for _ in range(5000):
        y = engine.add(y, x)
    (gx,) = engine.grad(y, [x], np.array([[1.0, 3.0]]))
    np.testing.assert_array_equal(engine.value(y), 5001 * x0)
    np.testing.assert_array_equal(gx, [[5001.0, 3 * 5001.0]])


# -- fan-out: shares are added --------------------------------------------------------


def diamond(x: np.ndarray, y: np.ndarray, cot: np.ndarray) -> float:
    h = x * y
    return float(np.sum(cot * (h + h * h)))


def test_diamond_matches_finite_differences_and_tensorflow():
    x0, y0, cot = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))

    def build(engine):
        x, y = engine.leaf("x", x0), engine.leaf("y", y0)
        h = engine.mul(x, y)
        out = engine.add(h, engine.mul(h, h))
        return engine.grad(out, [x, y, h], cot)

    gx, gy, gh = build(BuiltinEngine())
    fd_x, fd_y = central_difference(lambda x, y: diamond(x, y, cot), [x0, y0])
    np.testing.assert_allclose(gx, fd_x, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, fd_y, rtol=1e-6, atol=1e-8)
    h0 = x0 * y0
    np.testing.assert_allclose(gh, cot * (1 + 2 * h0), rtol=1e-12)
    # Overwriting instead of adding would give h only one of its two shares.
    assert not np.allclose(gh, cot) and not np.allclose(gh, cot * 2 * h0)

    for got, want in zip((gx, gy, gh), build(TensorFlowEngine()), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


DIAMOND_CASES = """\
    defaults:
      cotangent: random
    cases:
      - name: diamond
        expr: |
          h = x * y
          h + h * h
        inputs:
          x: {shape: [2, 3], seed: 1}
          y: {shape: [2, 3], seed: 2}
        wrt: [x, y, h]
      - name: diamond_wrt_h_only
        expr: |
          h = x * y
          h + h * h
        inputs:
          x: {shape: [2, 3], seed: 1}
          y: {shape: [2, 3], seed: 2}
        wrt: [h]
      - name: deep_diamond
        expr: |
          h = sin(x)
          g = h * h
          g * h + exp(-g)
        inputs:
          x: {shape: [4], seed: 3}
        wrt: [x, g, h]
"""


def test_diamond_and_intermediate_wrt_through_runner_match_tensorflow(tmp_path):
    cases = load_cases(tmp_path, DIAMOND_CASES)
    result = run(cases, BuiltinEngine)
    assert [c.status for c in result.cases] == ["passed"] * 3, [c.message for c in result.cases]

    full, h_only, deep = result.cases
    assert set(by_name(full)) == {"x", "y", "h"}
    for case, result_case in zip(cases[:2], (full, h_only), strict=True):
        h0 = case.inputs["x"] * case.inputs["y"]
        want_h = case.cotangent * (1 + 2 * h0)
        gh = by_name(result_case)["h"]
        # Both TensorFlow and the engine give the total derivative through both uses,
        # also when no input is in wrt (nothing may be taken for a constant then).
        np.testing.assert_allclose(gh.reference, want_h, rtol=1e-12)
        np.testing.assert_allclose(gh.engine, want_h, rtol=1e-12)
        assert np.abs(want_h).min() > 1e-3  # not vacuously zero

    x0 = cases[2].inputs["x"]
    cot = cases[2].cotangent
    (fd_x,) = central_difference(
        lambda x: float(np.sum(cot * (np.sin(x) ** 3 + np.exp(-(np.sin(x) ** 2))))),
        [x0],
    )
    np.testing.assert_allclose(by_name(deep)["x"].engine, fd_x, rtol=1e-6, atol=1e-8)
    g0 = np.sin(x0) ** 2
    np.testing.assert_allclose(
        by_name(deep)["g"].engine, cot * (np.sin(x0) - np.exp(-g0)), rtol=1e-12
    )


# -- unbroadcasting: leading axes and size-1 axes --------------------------------------


@pytest.mark.parametrize(
    ("shape", "grad_shape", "want"),
    [
        ((3, 1), (2, 3, 4), np.full((3, 1), 8.0)),
        ((4,), (2, 3, 4), np.full((4,), 6.0)),
        ((1, 3, 1), (2, 3, 4), np.full((1, 3, 1), 8.0)),
        ((), (2, 3), np.array(6.0)),
        ((2, 3), (2, 3), np.ones((2, 3))),
    ],
)
def test_unbroadcast_sums_leading_and_size1_axes(shape, grad_shape, want):
    got = unbroadcast(np.ones(grad_shape), shape)
    assert np.shape(got) == shape
    np.testing.assert_array_equal(got, want)


BROADCAST_CASES = """\
    defaults:
      cotangent: random
    cases:
      - name: add_3x1_to_2x3x4
        expr: a + b
        inputs: {a: {shape: [3, 1]}, b: {shape: [2, 3, 4]}}
      - name: mul_row_to_batch
        expr: a * b
        inputs: {a: {shape: [4]}, b: {shape: [2, 3, 4]}}
      - name: sub_both_broadcast
        expr: a - b
        inputs: {a: {shape: [1, 3, 1]}, b: {shape: [2, 1, 4]}}
      - name: div_leading_and_inner_ones
        expr: a / b
        inputs: {a: {shape: [2, 1, 1, 4]}, b: {shape: [3, 1], init: positive}}
      - name: scalar_times_matrix
        expr: s * b + s
        inputs: {s: 1.5, b: {shape: [2, 3]}}
"""


def test_broadcast_gradients_match_tensorflow(tmp_path):
    cases = load_cases(tmp_path, BROADCAST_CASES)
    result = run(cases, BuiltinEngine)
    assert [c.status for c in result.cases] == ["passed"] * len(cases), [
        (c.name, c.message) for c in result.cases
    ]
    for case, outcome in zip(cases, result.cases, strict=True):
        for name, comparison in by_name(outcome).items():
            assert comparison.engine_shape == case.inputs[name].shape
            assert comparison.max_abs_diff is not None and comparison.max_abs_diff < 1e-12

    # The (3, 1) operand's gradient sums the cotangent over axes 0 and 2.
    cot = cases[0].cotangent
    np.testing.assert_allclose(
        by_name(result.cases[0])["a"].engine, cot.sum(axis=(0, 2))[:, None], rtol=1e-12
    )


# -- unconnected inputs and constants ---------------------------------------------------


def test_unconnected_input_gets_zeros_of_its_shape():
    engine = BuiltinEngine()
    x = engine.leaf("x", np.ones((2, 3)))
    y = engine.leaf("y", np.array([0.5, 1.0]))
    out = engine.sin(y)
    gx, gy = engine.grad(out, [x, y], np.ones(2))
    assert gx.shape == (2, 3)
    np.testing.assert_array_equal(gx, np.zeros((2, 3)))
    np.testing.assert_allclose(gy, np.cos([0.5, 1.0]))


def test_unconnected_input_and_binding_through_runner_are_zero_like_tensorflow(tmp_path):
    cases = load_cases(
        tmp_path,
        """\
        cases:
          - name: dangling
            expr: |
              h = x * 2.0
              y * 3.0
            inputs: {x: [1.0, 2.0], y: [3.0, 4.0, 5.0]}
            wrt: [x, y, h]
            cotangent: ones
        """,
    )
    (outcome,) = run(cases, BuiltinEngine).cases
    assert outcome.status == "passed", outcome.message
    grads = by_name(outcome)
    for name in ("x", "h"):
        np.testing.assert_array_equal(grads[name].reference, np.zeros(2))
        np.testing.assert_array_equal(grads[name].engine, np.zeros(2))
    np.testing.assert_array_equal(grads["y"].engine, np.full(3, 3.0))


class Recording(BuiltinEngine):
    """Records how the driver builds nodes and which arguments the backward pass visits."""

    def __init__(self) -> None:
        self.leaves: list[str] = []
        self.constants: list[np.ndarray] = []
        self.visited: list[Tensor] = []

    def leaf(self, name, value):
        self.leaves.append(name)
        return super().leaf(name, value)

    def constant(self, value):
        self.constants.append(np.array(value))
        return super().constant(value)

    def vjp(self, tensor, i, g):
        self.visited.append(tensor.args[i])
        return super().vjp(tensor, i, g)


def test_literals_and_inputs_outside_wrt_are_never_differentiated(tmp_path):
    (case,) = load_cases(
        tmp_path,
        """\
        cases:
          - name: with_constants
            expr: x * 2.5 + exp(y) * x - 3.0
            inputs: {x: [1.0, -2.0], y: [0.5, 0.25]}
            wrt: [x]
        """,
    )
    engine = Recording()
    got = run_engine(engine, case.expression, case.inputs, case.wrt, case.cotangent)
    assert engine.leaves == ["x"]  # y is not in wrt: a constant, like the literals
    scalars = sorted(float(c) for c in engine.constants if c.ndim == 0)
    arrays = [c for c in engine.constants if c.ndim > 0]
    assert scalars == [2.5, 3.0]
    assert len(arrays) == 1 and np.array_equal(arrays[0], [0.5, 0.25])
    assert all(t.requires_grad for t in engine.visited)
    assert all(t.op is not None or t.name == "x" for t in engine.visited)
    np.testing.assert_allclose(got.grads["x"], (2.5 + np.exp([0.5, 0.25])) * case.cotangent)
    assert list(got.grads) == ["x"]


def test_backward_keeps_no_gradient_for_constants():
    engine = BuiltinEngine()
    x = engine.leaf("x", np.array([1.0, 2.0]))
    c = engine.constant(np.array([3.0, 4.0]))
    out = engine.mul(engine.mul(x, c), c)
    grads = engine.backward(out, np.ones(2))
    assert c not in grads
    np.testing.assert_array_equal(grads[x], [9.0, 16.0])
    # Asking for a constant anyway gives zeros, as TensorFlow does for an unwatched tensor.
    gx, gc = engine.grad(out, [x, c], np.ones(2))
    np.testing.assert_array_equal(gx, [9.0, 16.0])
    np.testing.assert_array_equal(gc, [0.0, 0.0])
