"""Contractions and solvers through the product (SPEC §3.1): einsum's equation in the
expression, bad shapes and attributes as case errors at file:line, cholesky's symmetrised
gradient in the numeric reference, the fuzzer's well-conditioned matrices, and the stock
adapters on the shipped cases. (Each op's VJPs and JVPs against TensorFlow and finite
differences are in test_ops.py and test_op_jvps_and_hvps.py.)"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given

from gradcheck.cases import InvalidCase, load_file
from gradcheck.cases.loader import load_case
from gradcheck.cases.model import Case
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.reverse import run_engine
from gradcheck.expression import ExpressionError, parse
from gradcheck.fuzzing.domain import dominant
from gradcheck.fuzzing.generate import Space, examples
from gradcheck.fuzzing.program import Apply, Leaf
from gradcheck.fuzzing.search import seed_alone
from gradcheck.references.computed import computed_reference
from gradcheck.runner import RunOptions, run
from test_fuzz import PROPERTY

ROOT = Path(__file__).resolve().parent.parent


def loaded(expr: str, **inputs: object) -> Case:
    case = load_case({"name": "t", "expr": expr, "inputs": inputs, "cotangent": "random"})
    assert isinstance(case, Case), case
    return case


# -- einsum's equation: the first, string argument ---------------------------------------


def test_einsum_takes_its_equation_first_and_its_operands_spread():
    expression = parse('einsum("ij,jk->ki", a, b) + 1', {"a": (3, 4), "b": (4, 2)})
    node = next(n for n in expression.op_nodes if n.op.name == "einsum")
    assert node.attrs == {"equation": "ij,jk->ki"}
    assert [a.name for a in node.args] == ["a", "b"]
    assert node.shape == (2, 3)


class Spy(BuiltinEngine):
    """Records how the driver calls einsum: `einsum(self, *operands, equation)`."""

    calls: ClassVar[list] = []

    def einsum(self, *operands, **attrs):
        Spy.calls.append((len(operands), attrs))
        return super().einsum(*operands, **attrs)


def test_engines_get_the_operands_spread_and_the_equation_by_keyword():
    case = loaded('einsum("ii,ij->j", x, y)', x={"shape": [3, 3]}, y={"shape": [3, 2]})
    Spy.calls.clear()
    run_engine(Spy(), case.expression, case.inputs, case.wrt, case.cotangent)
    assert Spy.calls == [(2, {"equation": "ii,ij->j"})]


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("einsum(a, b)", 'einsum takes its equation first, a string: einsum("ij,jk->ik", a, b)'),
        ('einsum("ij->ji")', "einsum needs at least one operand after its equation"),
        ('einsum("ij,jk->ik", a)', "has subscripts for 2 operand(s), got 1"),
        ('einsum("ijk->i", a)', "operand 1 has shape (3, 4) (rank 2)"),
        ('einsum("ii->i", a)', "index 'i' has size 3 in operand 1 and 4 in operand 1"),
        ('einsum("ij,ij->i", a, b)', "index 'i' has size 3 in operand 1 and 4 in operand 2"),
        ('einsum("ij->k", a)', "output index 'k' is in no operand"),
        ('einsum("ij", a, equation="ij")', "equation given twice"),
    ],
)
def test_a_malformed_einsum_is_an_expression_error(expr, message):
    with pytest.raises(ExpressionError) as e:
        parse(expr, {"a": (3, 4), "b": (4, 4)})
    assert e.value.message.startswith(expr + ": ")
    assert message in e.value.message


# -- bad shapes and attributes: case errors at file:line ----------------------------------

BAD = """\
cases:
  - name: ok
    expr: inv(x)
    inputs:
      x: {shape: [2, 2]}
  - name: inv_not_square
    expr: inv(x)
    inputs:
      x: {shape: [2, 3]}
  - name: solve_rows
    expr: solve(a, b)
    inputs:
      a: {shape: [3, 3]}
      b: {shape: [2, 1]}
  - name: solve_batch
    expr: solve(a, b)
    inputs:
      a: {shape: [2, 3, 3]}
      b: {shape: [3, 1]}
  - name: tensordot_axes
    expr: tensordot(a, b, [[0], [0]])
    inputs:
      a: {shape: [2, 3]}
      b: {shape: [3, 4]}
  - name: tensordot_no_axes
    expr: tensordot(a, b)
    inputs:
      a: {shape: [2, 3]}
      b: {shape: [3, 4]}
  - name: einsum_equation
    expr: einsum("ij,jk", a)
    inputs:
      a: {shape: [2, 3]}
  - name: triangular_lower
    expr: triangular_solve(a, b, lower='yes')
    inputs:
      a: {shape: [3, 3]}
      b: {shape: [3, 1]}
"""


def test_bad_shapes_and_attributes_are_case_errors_at_their_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    items = {item.name: item for item in load_file(path)}
    assert isinstance(items.pop("ok"), Case)
    want = {
        "inv_not_square": (7, "inv(x): x has shape (2, 3); it needs square matrices"),
        "solve_rows": (11, "solve(a, b): b has 2 rows, a is 3x3"),
        "solve_batch": (16, "solve(a, b): batch axes (2,) and () differ"),
        "tensordot_axes": (21, "axis 0 of a has size 2, axis 0 of b 3"),
        "tensordot_no_axes": (26, "tensordot(a, b): axes is required"),
        "einsum_equation": (31, "has subscripts for 2 operand(s), got 1"),
        "triangular_lower": (35, "lower must be True or False, got 'yes'"),
    }
    for name, (line, message) in want.items():
        item = items[name]
        assert isinstance(item, InvalidCase), name
        assert item.line == line, (name, item.message)
        assert message in item.message, (name, item.message)


# -- cholesky: the symmetrised gradient, and the numeric reference's symmetric steps ------


def test_the_numeric_reference_agrees_with_tensorflow_on_cholesky():
    """Both give the symmetrised gradient. Finite differences that moved one element at a
    time (the lower triangle is all cholesky reads) would give another, zero above the
    diagonal: the numeric reference moves an element's mirror too (`Op.symmetric`)."""
    s = [[4.0, 1.0, 0.5], [1.0, 3.0, -0.5], [0.5, -0.5, 2.0]]
    case = loaded("cholesky(s) * b", s=s, b={"shape": [3, 3]})
    tf_run = computed_reference(case, "tensorflow")
    numeric_run = computed_reference(case, "numeric")
    want = tf_run.grads["s"]
    np.testing.assert_allclose(want, want.T, rtol=1e-12, atol=1e-12)  # TF's is symmetric
    np.testing.assert_allclose(numeric_run.grads["s"], want, rtol=1e-7, atol=1e-8)
    assert not numeric_run.untrusted["s"].any()
    one_sided = _lower_triangle_differences(np.array(s), case.inputs["b"] * case.cotangent)
    assert np.abs(one_sided - want).max() > 0.01  # the hook is what makes them agree


def _lower_triangle_differences(s: np.ndarray, weight: np.ndarray) -> np.ndarray:
    grad, h = np.zeros_like(s), 1e-6
    for j in np.ndindex(s.shape):
        plus, minus = s.copy(), s.copy()
        plus[j] += h
        minus[j] -= h
        diff = np.linalg.cholesky(plus) - np.linalg.cholesky(minus)
        grad[j] = np.sum(diff * weight) / (2 * h)
    return grad


def test_the_shipped_cases_pass_against_both_references():
    cases = [
        c for f in ("contractions.yaml", "solvers.yaml") for c in load_file(ROOT / "cases" / f)
    ]
    assert all(isinstance(c, Case) for c in cases)
    result = run(cases, BuiltinEngine, RunOptions(reference="both"))
    assert [(c.name, c.status) for c in result.cases] == [(c.name, "passed") for c in cases], [
        (c.name, c.message) for c in result.cases if c.status != "passed"
    ]


# -- the fuzzer: matrices an op inverts are drawn well-conditioned -------------------------

SOLVERS = ("inv", "det", "solve", "cholesky", "triangular_solve", "tensordot", "einsum")


@PROPERTY
@given(example=examples(Space(SOLVERS)))
def test_generated_matrices_that_an_op_inverts_are_diagonally_dominant(example):
    case = example.case
    engine = BuiltinEngine()
    run_engine(engine, case.expression, case.inputs, case.wrt, case.cotangent)  # no raise
    values = dict(case.inputs)
    for node in case.expression.op_nodes:
        op = node.op
        for param in {*op.conditioned, *op.symmetric}:
            arg = node.args[op.params.index(param)]
            if arg.is_input:
                assert dominant(values[arg.name], symmetric=param in op.symmetric), node.text


def test_the_fuzzer_makes_a_fresh_matrix_dominant_and_reaches_every_solver():
    seen: set[str] = set()

    @PROPERTY
    @given(example=examples(Space(SOLVERS, max_ops=2)))
    def collect(example):
        used: set[int] = set()  # leaves an op took before: made dominant only at first use
        for node in _applications(example.program.output):
            seen.add(node.op.name)
            inverted = (*node.op.conditioned, *node.op.symmetric)
            for param, arg in zip(node.op.params, node.args, strict=False):
                if param in inverted and isinstance(arg, Leaf) and id(arg) not in used:
                    m = np.array(arg.values).reshape(arg.shape)
                    assert dominant(m, symmetric=param in node.op.symmetric), node.op.name
            used |= {id(a) for a in node.args if isinstance(a, Leaf)}

    with seed_alone():  # the draws from the seed alone, whatever literals gradcheck holds
        collect()
    assert {"inv", "det", "solve", "cholesky", "triangular_solve", "einsum", "tensordot"} <= seen


def _applications(output: Apply) -> list[Apply]:
    """A program's op applications, each after its arguments (the order they were drawn)."""
    order: list[Apply] = []
    stack: list[tuple[Apply, bool]] = [(output, False)]
    while stack:
        node, done = stack.pop()
        if done:
            if node not in order:  # a value used twice is drawn once
                order.append(node)
            continue
        stack.append((node, True))
        stack.extend((a, False) for a in reversed(node.args) if isinstance(a, Apply))
    return order


# -- the stock adapters pass the shipped cases ---------------------------------------------


@pytest.mark.parametrize("spec", ["torch", "jax", "autograd"])
def test_the_stock_engines_pass_the_shipped_cases(spec):
    """HIPS autograd's own einsum VJP refuses a repeated index and its solve_triangular
    VJP takes 2-D arrays only: its adapter takes diagonals and solves matrix by matrix.
    It has no JVP for inv or cholesky: forward mode through them is unsupported."""
    from gradcheck.engines.loading import load_engine

    cases = [
        c
        for f in ("contractions.yaml", "solvers.yaml", "forward_and_second_order.yaml")
        for c in load_file(ROOT / "cases" / f)
    ]
    cases = [c for c in cases if "forward_and" not in c.file or _uses_new_op(c)]
    result = run(cases, load_engine(spec), RunOptions(reference="both"))
    status = {c.name: c.status for c in result.cases}
    skipped = {"inv-det-solve", "cholesky-triangular-solve"} if spec == "autograd" else set()
    assert {name for name, s in status.items() if s == "skipped"} == skipped
    assert all(s == "passed" for name, s in status.items() if name not in skipped), [
        (c.name, c.message) for c in result.cases if c.status not in ("passed", "skipped")
    ]
    assert len(status) == len(cases) == 19


def _uses_new_op(case: Case) -> bool:
    return any(n.op.name in SOLVERS for n in case.expression.op_nodes)


def test_a_case_file_written_by_hand_reads_einsum_as_the_docs_show(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            cases:
              - name: trace
                expr: einsum("ii->", x) + trace(x)
                inputs:
                  x: {shape: [3, 3]}
            """
        )
    )
    (case,) = load_file(path)
    assert isinstance(case, Case), case
    got = run_engine(BuiltinEngine(), case.expression, case.inputs, case.wrt, case.cotangent)
    # the trace twice over: the cotangent on the diagonal, twice, and 0 off it
    np.testing.assert_allclose(got.grads["x"], 2 * case.cotangent * np.eye(3))
