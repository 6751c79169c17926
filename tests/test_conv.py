# ruff: noqa: E501  (the tables of expressions and messages read best one per line)
"""The convolutions (SPEC §3.1, issue 23) through the product: a bad attribute is a case
error at the expression's file:line, naming it; a small case whose im2col expansion is
huge is refused at the node's line (`Op.scratch`); the builtin engine's second order
runs through conv2d's adjoints; the stock torch, jax and autograd adapters pass the
shipped conv cases against TensorFlow and central differences; the fuzzer draws every
conv op, conv2d_transpose with an output_shape that fits its input. (Each op's VJPs and
JVPs against TensorFlow and central differences: tests/test_ops.py.)
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from gradcheck.cases import Case, InvalidCase, load_file, load_paths
from gradcheck.engines.loading import load_engine
from gradcheck.errors import UsageError
from gradcheck.fuzzing import Budget, fuzz_engine
from gradcheck.fuzzing.proposals import completions, first_ranks
from gradcheck.ops import get_op
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parents[1]

INPUTS = """\
    x: {shape: [2, 5, 5, 3]}
    w: {shape: [3, 3, 3, 4]}
    u: {shape: [2, 6, 3]}
    k: {shape: [3, 3, 4]}
    y: {shape: [2, 3, 3, 4]}
    t: {shape: [3, 3, 3, 4]}
"""


def load_one(tmp_path: Path, text: str, **options):
    path = tmp_path / "case.yaml"
    path.write_text(textwrap.dedent(text))
    (item,) = load_file(path, **options)
    return item


def case_text(expr: str) -> str:
    """A case of `expr` with the inputs above that it names (an unused one is an error)."""
    named = set(re.findall(r"\b([a-z])\b", expr))
    lines = [line for line in INPUTS.splitlines() if line.split(":")[0].strip() in named]
    inputs = textwrap.indent("\n".join(lines), " " * 6)
    return f'cases:\n  - name: c\n    expr: "{expr}"\n    inputs:\n{inputs}\n'


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("conv2d(x, k)", "conv2d(x, k): w has shape (3, 3, 4); it needs 4 axes (HWIO)"),
        ("conv2d(x, w, strides=0)", "strides=0: strides must be an int >= 1 or a list of 2 such ints"),
        ("conv2d(x, w, dilations=[1, 2, 1])", "dilations=[1, 2, 1]: dilations must be an int >= 1 or a list of 2 such ints"),
        ("conv2d(x, w, padding='same')", "padding='same': padding must be 'VALID', 'SAME' (upper case), an int >= 0"),
        ("conv2d(x, w, padding=[[1, -1], [0, 0]])", "a list of 2 [before, after] pairs of ints >= 0"),
        ("conv2d(x, w, padding=[1, 1])", "padding=[1, 1]: padding must be"),
        ("conv2d(x, w, groups=2)", "groups=2 must divide x's 3 input channels and w's 4 output channels"),
        ("conv2d(x, w, groups=0)", "groups=0: groups must be an int >= 1"),
        ("conv2d(x, w, data_format='NCHW')", "x has 5 input channels, w expects 3 (groups=1)"),
        ("conv2d(x, w, data_format='NWC')", "data_format='NWC': data_format must be 'NHWC' or 'NCHW'"),
        ("conv2d(x, w, filter_format='OIW')", "filter_format='OIW': filter_format must be 'HWIO' or 'OIHW'"),
        ("conv1d(x, k)", "x has shape (2, 5, 5, 3); it needs 3 axes (NWC)"),
        ("conv1d(u, k, dilations=3)", "spatial axis 0 of x has size 6, 6 padded: smaller than the kernel's span 7 (size 3, dilation 3)"),
        ("conv1d(u, k, data_format='NHWC')", "data_format='NHWC': data_format must be 'NWC' or 'NCW'"),
        ("conv2d_transpose(y, t)", "output_shape=None: output_shape must be the output's full shape, 4 sizes >= 1 in NHWC order"),
        ("conv2d_transpose(y, t, output_shape=[2, 5, 5])", "output_shape=[2, 5, 5]: output_shape must be the output's full shape"),
        ("conv2d_transpose(y, t, output_shape=[2, 5, 5, 3])", "x has shape (2, 3, 3, 4); an output of shape (2, 5, 5, 3) with strides=1, padding='SAME' needs x of shape (2, 5, 5, 4)"),
        ("conv2d_transpose(y, t, output_shape=[2, 5, 5, 2], strides=2)", "the output has 2 input channels, w expects 3 (groups=1)"),
        ("conv2d_transpose(y, t, output_shape=[2, 5, 5, 3], strides=2, padding='FULL')", "padding='FULL': padding must be 'VALID', 'SAME'"),
    ],
)  # fmt: skip
def test_a_bad_attribute_is_a_case_error_at_the_expression_s_line(tmp_path, expr, message):
    case = load_one(tmp_path, case_text(expr))
    assert isinstance(case, InvalidCase), case
    assert case.line == 3
    assert message in case.message
    assert "not used" not in case.message  # the attribute's error alone
    assert case.message.startswith(expr.split("(")[0] + "(")  # the node named first


def test_the_valid_spellings_of_the_same_table_load(tmp_path):
    """The inputs above are right for these: the errors are the attributes' alone."""
    for expr in ("conv2d(x, w, padding='SAME')", "conv1d(u, k, dilations=2)",
                 "conv2d_transpose(y, t, output_shape=[2, 5, 5, 3], strides=2)"):  # fmt: skip
        assert isinstance(load_one(tmp_path, case_text(expr)), Case), expr


SCRATCH = """\
    cases:
      - name: huge_windows
        expr: |
          a = sum(x * x) + sum(y)
          a + sum({conv})
        inputs:
          x: {{shape: [4, 64, 64, 16]}}
          w: {{shape: [9, 9, 16, 8]}}
          y: {{shape: [4, 64, 64, 8]}}
    """


@pytest.mark.parametrize(
    ("conv", "held"),
    [
        # 4 images x 64 x 64 outputs x a 9 x 9 window x 16 channels
        ("conv2d(x, w, padding='SAME')", 4 * 64 * 64 * 9 * 9 * 16),
        # the adjoint's is its output's (4 x 128 x 128 x 16): a window of 16 channels at
        # each of y's 64 x 64 positions
        ("conv2d_transpose(y, w, output_shape=[4, 128, 128, 16], strides=2)", 4 * 64 * 64 * 9 * 9 * 16),
    ],
)  # fmt: skip
def test_a_huge_im2col_expansion_is_a_case_error_at_the_node_s_line(tmp_path, conv, held):
    """Inputs and outputs of at most 1M elements are within every cap; the expansion
    the convolution holds while it computes is not."""
    text = SCRATCH.format(conv=conv)
    case = load_one(tmp_path, text)
    assert isinstance(case, InvalidCase), case
    assert case.line == 5  # the conv's own line of the block, not the case's
    assert (
        f"its im2col expansion holds {held:,} elements, above the limit of 10,000,000"
        in case.message
    )
    assert case.message.startswith(conv.split("(")[0] + "(")
    # Raised past it, the same case loads: the expansion was the only objection.
    assert isinstance(load_one(tmp_path, text, max_elements=held), Case)


def test_the_expansions_count_against_the_case_s_total_too(tmp_path):
    """Six convolutions, each expansion within a per-array cap of 22M, together past the
    case's total (5 times the cap): refused, though no value is large."""
    conv = " + ".join(["conv2d(x, w, padding='SAME')"] * 6)
    case = load_one(tmp_path, SCRATCH.format(conv=conv), max_elements=22_000_000)
    assert isinstance(case, InvalidCase), case
    assert "elements together, above the limit of 110,000,000 per case" in case.message
    assert isinstance(load_one(tmp_path, SCRATCH.format(conv=conv.rsplit(" + ", 2)[0]),
                               max_elements=22_000_000), Case)  # fmt: skip


def test_second_order_through_conv2d_on_the_builtin_engine(tmp_path):
    """conv2d's VJPs are the conv ops' adjoints, recorded, so grad(create_graph=True)
    differentiates them: checked in float64 against TensorFlow and central differences."""
    path = tmp_path / "second.yaml"
    path.write_text(textwrap.dedent("""\
        cases:
          - name: second
            order: 2
            modes: [rev, fwd]
            dtype: float64
            expr: sum(tanh(conv2d(x * x, w, strides=2, padding='SAME', dilations=1)) * conv2d(x, w, padding=1, data_format='NHWC')[:, ::2, ::2, :]) + sum(conv2d(x, g, groups=2, dilations=2) ** 2.0)
            inputs:
              x: {shape: [1, 5, 5, 2]}
              w: {shape: [3, 3, 2, 3]}
              g: {shape: [2, 2, 1, 2]}
        """))  # fmt: skip
    cases = load_file(path)
    for reference in ("tensorflow", "numeric"):
        result = run(cases, load_engine("builtin"), RunOptions(reference=reference))
        assert [c.status for c in result.cases] == ["passed"], result.cases[0].message


def shipped() -> list[Case]:
    cases = load_paths(
        [ROOT / "cases" / "conv.yaml", ROOT / "cases" / "forward_and_second_order.yaml"]
    )
    return [c for c in cases if isinstance(c, Case) and "conv" in c.expr]


@pytest.mark.parametrize("spec", ["builtin", "torch", "jax", "autograd"])
@pytest.mark.parametrize("reference", ["tensorflow", "numeric"])
def test_engines_pass_the_shipped_conv_cases(spec, reference):
    cases = shipped()
    assert len(cases) >= 16
    ops = {n.op.name for c in cases for n in c.expression.op_nodes}
    assert {"conv1d", "conv2d", "conv2d_transpose"} <= ops
    result = run(cases, load_engine(spec), RunOptions(reference=reference))
    bad = [(c.name, c.status, c.message) for c in result.cases if not c.passed]
    assert not bad
    assert all(c.status == "passed" for c in result.cases)


# -- fuzzing -----------------------------------------------------------------------------


def test_the_fuzzer_proposes_conv_attributes_and_a_fitting_output_shape():
    assert first_ranks("conv1d", 3) == (3,)
    assert first_ranks("conv2d", 4) == (4,) and first_ranks("conv2d_transpose", 4) == (4,)
    drawn, conv2d = {}, set()
    for first in [(1, 3, 3, 2), (2, 2, 2, 2), (1, 2, 3, 3)]:
        for c in completions("conv2d_transpose", first, (), 4):
            attrs = {**get_op("conv2d_transpose").attrs, **dict(c.attrs)}
            assert c.shape == tuple(attrs["output_shape"])  # the output it was drawn as
            drawn.setdefault("strides", set()).add(attrs["strides"])
            drawn.setdefault("data_format", set()).add(attrs["data_format"])
            drawn.setdefault("padding", set()).add(attrs["padding"])
        for c in completions("conv2d", first, (), 4):
            conv2d.update(c.attrs)
    assert drawn["strides"] == {1, 2} and drawn["data_format"] == {"NHWC", "NCHW"}
    assert drawn["padding"] == {"SAME", "VALID"}
    assert {("strides", 2), ("padding", "SAME"), ("padding", 1), ("dilations", 2)} <= conv2d
    assert {("groups", 2), ("data_format", "NCHW"), ("filter_format", "OIHW")} <= conv2d


def test_fuzz_of_the_conv_ops_on_the_builtin_engine_finds_nothing():
    found = fuzz_engine(
        load_engine("builtin"),
        ops=["conv1d", "conv2d", "conv2d_transpose"],
        max_rank=4,
        budget=Budget(max_examples=150),
        seed=1,
    )
    assert found.search.examples == 150
    assert not found.bugs, [b.key for b in found.bugs]
    drawn = found.search.coverage.ops
    assert all(drawn[op].examples >= 20 for op in ("conv1d", "conv2d", "conv2d_transpose"))


def test_fuzz_of_conv2d_alone_below_its_rank_says_which_rank_it_needs():
    with pytest.raises(
        UsageError,
        match=r"no op of conv2d applies to an input of rank 3 or less: --max-rank 4 is needed",
    ):
        fuzz_engine(load_engine("builtin"), ops=["conv2d"], budget=Budget(max_examples=5))
