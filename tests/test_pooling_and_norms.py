# ruff: noqa: E501  (the tables of expressions and messages read best one per line)
"""Pooling, normalisation, softmax_cross_entropy and one_hot (SPEC §3.1, issue 23) through
the product: bad attributes and labels are case errors at file:line, the builtin engine's
second order runs through the pools' scatter/gather ops, and the stock torch and jax
adapters pass the shipped cases of these ops against TensorFlow and finite differences.
(Each op's VJPs against TensorFlow and central differences: tests/test_ops.py.)
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import Case, InvalidCase, load_file, load_paths
from gradcheck.engines.loading import load_engine
from gradcheck.ops.pooling import POOL_GATHER, POOL_SCATTER
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parents[1]
FILES = ("pooling.yaml", "normalization.yaml", "gathers.yaml")


def load_invalid(tmp_path: Path, text: str) -> InvalidCase:
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent(text))
    (item,) = load_file(path)
    assert isinstance(item, InvalidCase), item
    return item


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("max_pool2d(x, ksize=5)", "max_pool2d(x, ksize=5): ksize 5 is larger than axis H of size 4"),
        ("max_pool2d(x, ksize=2, strides=0)", "strides must be a positive integer or a list of 2, got 0"),
        ("avg_pool2d(x, ksize=2, padding='same')", "padding must be 'VALID' or 'SAME', got 'same'"),
        ("avg_pool2d(x, ksize=[2, 2, 2])", "ksize must be a positive integer or a list of 2"),
        ("max_pool2d(x)", "ksize must be a positive integer or a list of 2, got None"),
        ("max_pool2d(x, ksize=2, data_format='NWC')", "data_format must be 'NHWC' or 'NCHW'"),
        ("max_pool1d(x, ksize=2)", "x has shape (2, 4, 4, 3); it needs rank 3 (N, W, C"),
        ("layer_norm(x, axis=4)", "axis 4 is out of range for rank 4"),
        ("batch_norm(x, axis=[0, 0])", "axis [0, 0] names the same axis twice"),
        ("layer_norm(x, epsilon=-1.0)", "epsilon must be a number >= 0, got -1.0"),
        ("softmax_cross_entropy(x, x, axis=-5)", "axis -5 is out of range for rank 4"),
    ],
)  # fmt: skip
def test_a_bad_attribute_is_a_case_error_at_the_expression_s_line(tmp_path, expr, message):
    case = load_invalid(
        tmp_path,
        f"""\
        cases:
          - name: bad
            inputs:
              x: {{shape: [2, 4, 4, 3]}}
            expr: "{expr}"
        """,
    )
    assert case.line == 5
    assert message in case.message


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ("[[0.5, 0.6], [1.0, 0.0]]", "labels must sum to 1 along axis -1 (probabilities; "
         "TensorFlow's gradient assumes it), but one sums to 1.1"),
        ("{shape: [2, 2]}", "labels are drawn at random, but they must sum to 1 along axis -1"),
    ],
)  # fmt: skip
def test_labels_not_summing_to_one_are_a_case_error_at_their_line(tmp_path, labels, message):
    case = load_invalid(
        tmp_path,
        f"""\
        cases:
          - name: ce
            expr: softmax_cross_entropy(z, p)
            inputs:
              z: {{shape: [2, 2]}}
              p: {labels}
        """,
    )
    assert case.line == 6
    assert "softmax_cross_entropy(z, p): " + message in case.message


def test_labels_are_summed_along_the_op_s_axis_whichever_it_is(tmp_path):
    """Columns that sum to 1 are probabilities along axis 0; along the rows they are not."""
    path = tmp_path / "cols.yaml"
    text = """\
        cases:
          - name: ce
            expr: softmax_cross_entropy(z, p, axis={axis})
            inputs:
              z: {{shape: [3, 2]}}
              p: [[0.2, 0.5], [0.3, 0.25], [0.5, 0.25]]
        """
    path.write_text(textwrap.dedent(text.format(axis=0)))
    (good,) = load_file(path)
    assert isinstance(good, Case), good
    bad = load_invalid(tmp_path, text.format(axis=1))
    assert bad.line == 6 and "but one sums to 0.55" in bad.message


def test_one_hot_out_of_range_is_a_case_error_and_its_output_takes_the_case_dtype(tmp_path):
    case = load_invalid(
        tmp_path,
        """\
        cases:
          - name: oh
            expr: one_hot(i, 3)
            inputs:
              i: {values: [0, 3], dtype: int64}
        """,
    )
    assert case.line == 5 and "index 3 out of range for depth 3" in case.message
    path = tmp_path / "ok.yaml"
    path.write_text("cases:\n  - {name: f, dtype: float32, expr: 'one_hot(i, 2) * x',\n"
                    "     inputs: {x: {shape: [2]}, i: {values: [1, 0], dtype: int32}}}\n")  # fmt: skip
    (ok,) = load_file(path)
    assert isinstance(ok, Case)
    (node,) = [n for n in ok.expression.op_nodes if n.op.name == "one_hot"]
    assert node.attrs == {"depth": 2, "dtype": "float32"}


def test_overlapping_windows_accumulate_and_the_scatter_gather_are_adjoint():
    """<scatter(g), t> = <g, gather(t)>: the pair is a VJP and its JVP, for both modes."""
    rng = np.random.default_rng(0)
    x = rng.permutation(2 * 5 * 5 * 3).reshape(2, 5, 5, 3) * 0.25
    attrs = {"ksize": 3, "strides": 1, "padding": "SAME", "data_format": "NHWC", "rank": 2}
    for mode in ("max", "avg"):
        g = rng.standard_normal((2, 5, 5, 3))
        t = rng.standard_normal(x.shape)
        left = np.vdot(POOL_SCATTER(g, x, mode=mode, **attrs), t)
        right = np.vdot(g, POOL_GATHER(t, x, mode=mode, **attrs))
        np.testing.assert_allclose(left, right, rtol=1e-12)
    # All-ones gradient of a 3x3 stride-1 avg pool: the centre is in 9 windows of 9 (SAME).
    ones = POOL_SCATTER(np.ones((1, 3, 3, 1)), np.ones((1, 3, 3, 1)), mode="avg", **attrs)
    assert ones[0, 1, 1, 0] == pytest.approx(1 / 4 * 4 + 1 / 6 * 4 + 1 / 9)


def test_second_order_through_a_max_pool_on_the_builtin_engine(tmp_path):
    """The pools' VJPs are ops (scatter/gather), so grad(create_graph=True) records them."""
    path = tmp_path / "second.yaml"
    path.write_text(textwrap.dedent("""\
        cases:
          - name: second
            order: 2
            expr: sum(max_pool2d(x * x, ksize=2, strides=1) ** 2.0) + sum(avg_pool1d(y ** 3.0, ksize=3, padding='SAME'))
            inputs:
              x: {shape: [1, 4, 4, 2]}
              y: {shape: [2, 5, 3]}
        """))  # fmt: skip
    cases = load_file(path)
    for reference in ("tensorflow", "numeric"):
        result = run(cases, load_engine("builtin"), RunOptions(reference=reference))
        assert [c.status for c in result.cases] == ["passed"], result.cases[0].message


def shipped() -> list[Case]:
    cases = load_paths([ROOT / "cases" / name for name in FILES])
    ours = ("pool", "norm", "softmax_cross", "one_hot")
    return [c for c in cases if isinstance(c, Case) and any(o in c.expr for o in ours)]


@pytest.mark.parametrize("spec", ["builtin", "torch", "jax", "autograd"])
@pytest.mark.parametrize("reference", ["tensorflow", "numeric"])
def test_engines_pass_the_shipped_cases_of_these_ops(spec, reference):
    cases = shipped()
    assert len(cases) >= 20
    result = run(cases, load_engine(spec), RunOptions(reference=reference))
    bad = [(c.name, c.status, c.message) for c in result.cases if not c.passed]
    assert not bad
    assert all(c.status == "passed" for c in result.cases)
