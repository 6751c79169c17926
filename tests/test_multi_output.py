"""Ops with several outputs through the product (SPEC §3.1: split, unstack, slogdet):
indexing and binding in expressions, the errors at file:line, the builtin engine's VJPs,
JVPs and second order against TensorFlow and central finite differences, an engine that
returns the wrong number of outputs, localisation naming `split[1]`, the reports, and
the stock adapters on the shipped cases. (Each op alone against TensorFlow and finite
differences is in test_ops.py and test_op_jvps_and_hvps.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcheck.cases import Case, InvalidCase, load_file
from gradcheck.cli import app
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.loading import load_engine
from gradcheck.engines.reverse import run_engine
from gradcheck.expression import parse
from gradcheck.runner import RunOptions, run
from planted_engines import SplitDropsLast

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "cases" / "multi_output.yaml"


def shipped() -> list[Case]:
    cases = load_file(SHIPPED)
    assert cases and all(isinstance(c, Case) for c in cases), cases
    return cases  # type: ignore[return-value]


# -- parsing: indexing at once, or a binding indexed later -------------------------------


def test_indexing_an_op_with_several_outputs_makes_one_node_per_output_used():
    expression = parse("split(x, 3, axis=1)[0] * split(x, 3, axis=1)[2]", {"x": (2, 6)})
    made = [n for n in expression.nodes if n.is_multi]  # each call written is a node
    assert [(m.op.name, m.outputs, m.shape) for m in made] == [("split", ((2, 2),) * 3, ())] * 2
    parts = [n for n in expression.nodes if n.is_part]
    assert [(p.part, p.shape, p.args[0]) for p in parts] == [
        (0, (2, 2), made[0]),
        (2, (2, 2), made[1]),
    ]
    assert expression.output.shape == (2, 2) and expression.output.op.name == "mul"


def test_a_binding_is_indexed_later_and_each_output_is_one_node():
    source = "parts = split(x, [1, -1])\na = parts[1]\nparts[1] * a + parts[-2]"
    expression = parse(source, {"x": (4, 3)})
    parts = [n for n in expression.nodes if n.is_part]
    assert [(p.part, p.shape) for p in parts] == [(1, (3, 3)), (0, (1, 3))]  # -2 is output 0
    assert expression.bindings["parts"].is_multi
    assert expression.bindings["a"] is parts[0]  # parts[1] written twice: the same node
    labels = {g.text: g.op for g in expression.outline()}
    assert labels["parts[1]"] == "split[1]" and labels["parts[-2]"] == "split[0]"
    assert labels["split(x, [1, -1])"] == "split"


def test_unstack_and_slogdet_shapes():
    expression = parse("unstack(x, axis=1)[2] + slogdet(m)[1]", {"x": (2, 3, 4), "m": (4, 3, 3)})
    (unstacked, signed) = [n for n in expression.nodes if n.is_multi]
    assert unstacked.outputs == ((2, 4),) * 3
    assert signed.outputs == ((4,), (4,))
    assert [n.shape for n in expression.nodes if n.is_part] == [(2, 4), (4,)]
    assert expression.output.shape == (2, 4)


BAD = """\
cases:
  - name: ok
    expr: split(x, 2)[1]
    inputs:
      x: {shape: [4, 3]}
  - name: out_of_range
    expr: |
      h = split(x, 2)
      h[0] + h[2]
    inputs:
      x: {shape: [4, 3]}
  - name: unindexed_argument
    expr: exp(split(x, 2))
    inputs:
      x: {shape: [4, 3]}
  - name: unindexed_output
    expr: |
      h = exp(x)
      unstack(h)
    inputs:
      x: {shape: [4, 3]}
  - name: sliced
    expr: split(x, 2)[0:1]
    inputs:
      x: {shape: [4, 3]}
  - name: count_does_not_divide
    expr: split(x, 3)
    inputs:
      x: {shape: [4, 3]}
  - name: sizes_do_not_add_up
    expr: split(x, [1, 2], axis=1)[0]
    inputs:
      x: {shape: [4, 4]}
  - name: no_count
    expr: split(x)[0]
    inputs:
      x: {shape: [4, 3]}
  - name: unstack_scalar
    expr: unstack(s)[0]
    inputs:
      s: {shape: []}
  - name: wrt_the_op
    expr: |
      h = split(x, 2)
      h[0] * h[1]
    wrt: [h]
    inputs:
      x: {shape: [4, 3]}
  - name: single_output_indexed_is_getitem
    expr: exp(x)[1]
    inputs:
      x: {shape: [4, 3]}
"""


def test_misuses_are_case_errors_at_their_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    items = {item.name: item for item in load_file(path)}
    assert isinstance(items.pop("ok"), Case)
    # Indexing an op with one output is getitem, as on any value (SPEC §3): not an error.
    getitem = items.pop("single_output_indexed_is_getitem")
    assert isinstance(getitem, Case) and getitem.expression.output.op.name == "getitem"
    want = {
        "out_of_range": (9, "h[2]: index 2 is out of range: split(x, 2) returns 2 values"),
        "unindexed_argument": (
            13,
            "exp(split(x, 2)): split(x, 2) returns 2 values (an op with several outputs); "
            "index the one to use: split(x, 2)[0] to split(x, 2)[1]",
        ),
        "unindexed_output": (19, "the output unstack(h) returns 4 values"),
        "sliced": (23, "split(x, 2) returns 2 values; index one with an integer"),
        "count_does_not_divide": (27, "must be >= 1 and divide axis 0 of size 4"),
        "sizes_do_not_add_up": (31, "the sizes add up to 3, not to axis 1's size 4"),
        "no_count": (35, "num_or_sizes is required"),
        "unstack_scalar": (39, "unstack(s): needs rank >= 1, got a scalar"),
        "wrt_the_op": (46, "wrt names 'h', an op with several outputs"),
    }
    assert set(items) == set(want)
    for name, (line, message) in want.items():
        item = items[name]
        assert isinstance(item, InvalidCase), name
        assert (item.line, message in item.message) == (line, True), (name, item.message)


# -- the builtin engine against TensorFlow and finite differences, every mode --------------


def test_the_shipped_cases_pass_reverse_forward_and_second_order_against_both_references():
    cases = shipped()
    options = RunOptions(reference="both", modes=("rev", "fwd"), order=2)
    result = run(cases, BuiltinEngine, options)
    assert [(c.name, c.status) for c in result.cases] == [(c.name, "passed") for c in cases], [
        (c.name, c.message) for c in result.cases if c.status != "passed"
    ]
    for case in result.cases:  # forward mode and second order ran, for every input
        assert case.modes == ["rev", "fwd"] and case.order == 2, case.name
        assert case.jvp and case.hvp, case.name
        assert all(i.status == "passed" for i in [*case.jvp, *case.hvp]), case.name


def numeric_gradient(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[j] += h
        minus[j] -= h
        grad[j] = (f(plus) - f(minus)) / (2 * h)
    return grad


def test_an_unused_output_gets_zero_gradient_and_one_used_twice_the_sum():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    expression = parse("h = split(x, 2, axis=1)\na = h[1]\nsum(a * a + sin(a))", {"x": x.shape})
    got = run_engine(BuiltinEngine(), expression, {"x": x}, ["x"], np.ones(()))
    want = np.zeros_like(x)
    want[:, 2:] = 2 * x[:, 2:] + np.cos(x[:, 2:])
    np.testing.assert_allclose(got.grads["x"], want, rtol=1e-12)
    assert not got.grads["x"][:, :2].any()  # the unused half


def test_slogdet_gradient_is_the_inverse_transpose_whatever_the_sign():
    x = np.array([[[0.5, 1.0], [2.0, 1.0]], [[2.0, 0.3], [0.1, 3.0]]])  # det -1.5 and 5.97
    expression = parse("s = slogdet(x)\nsum(s[1] * 2 + s[0] * 3)", {"x": x.shape})
    got = run_engine(BuiltinEngine(), expression, {"x": x}, ["x"], np.ones(()))
    want = 2 * np.swapaxes(np.linalg.inv(x), -1, -2)
    np.testing.assert_allclose(got.grads["x"], want, rtol=1e-12)
    fd = numeric_gradient(lambda v: 2 * np.linalg.slogdet(v)[1].sum(), x)
    np.testing.assert_allclose(got.grads["x"], fd, rtol=1e-6, atol=1e-8)


# -- an engine whose method returns the wrong number of outputs ----------------------------


class SplitReturnsOne(BuiltinEngine):
    name = "split-returns-one"

    def split(self, x, num_or_sizes=None, axis=0):
        return super().split(x, num_or_sizes=num_or_sizes, axis=axis)[0]


class SplitReturnsTooFew(BuiltinEngine):
    name = "split-returns-too-few"

    def split(self, x, num_or_sizes=None, axis=0):
        return super().split(x, num_or_sizes=num_or_sizes, axis=axis)[:-1]


@pytest.mark.parametrize(
    ("engine", "says"),
    [
        (SplitReturnsOne, "returned Tensor; expected a tuple or list of 3 nodes, one per output"),
        (SplitReturnsTooFew, "returned 2 nodes; expected a tuple or list of 3 nodes"),
    ],
)
def test_a_wrong_count_of_outputs_is_the_case_error_naming_the_node(engine, says):
    (case,) = [c for c in shipped() if c.name == "split_by_count_axis_1"]
    (result,) = run([case], engine, RunOptions()).cases
    assert result.status == "error"
    assert f"split(x, 3, axis=1) {says}" in result.message


# -- localisation: a node per output -------------------------------------------------------

PLANTED = """\
cases:
  - name: halves
    expr: |
      parts = split(x, 2, axis=1)
      a = parts[0]
      b = parts[1]
      sum(a * exp(b))
    inputs:
      x: {shape: [2, 4]}
"""


def test_localisation_names_the_output_whose_cotangent_the_vjp_drops(tmp_path):
    path = tmp_path / "planted.yaml"
    path.write_text(PLANTED)
    (result,) = run(load_file(path), SplitDropsLast, RunOptions()).cases
    assert result.status == "failed"
    nodes = {(n.node, n.op): n.status for n in result.nodes}
    assert nodes[("parts[0]", "split[0]")] == "passed"
    assert nodes[("parts[1]", "split[1]")] == "failed"
    assert all(s == "passed" for (_, op), s in nodes.items() if not op.startswith("split"))
    top = result.hints[0]
    assert (top.code, top.node, top.op, top.mechanism) == ("op-vjp", "parts[1]", "split", "zero")
    assert "split[1]'s VJP for argument 0 (x)" in top.message
    # The run's report card counts split once, found wrong there.
    card = run(load_file(path), SplitDropsLast, RunOptions()).ops
    assert "split" in card and "split[1]" not in card and card["split"].failed == 1


def test_the_json_and_html_reports_show_each_output_as_split_k(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "planted.yaml").write_text(PLANTED)
    engine = f"{ROOT / 'tests' / 'planted_engines.py'}:SplitDropsLast"
    args = ["run", "planted.yaml", "--engine", engine, "-q", "--no-cache"]
    CliRunner().invoke(app, [*args, "-o", "report.json"])
    CliRunner().invoke(app, [*args, "-o", "report.html"])
    (case,) = json.loads((tmp_path / "report.json").read_text())["cases"]
    graph = {g["text"]: (g["op"], g["outputs"]) for g in case["graph"]}
    assert graph["split(x, 2, axis=1)"] == ("split", 2)
    assert graph["parts[1]"] == ("split[1]", None)
    assert {n["op"]: n["status"] for n in case["nodes"]}["split[1]"] == "failed"
    page = (tmp_path / "report.html").read_text()
    for label in ("parts = split", "2 outputs", "b = split[1]", "wrong VJP for x (zero)"):
        assert label in page, label


def test_the_repro_script_calls_the_op_and_takes_the_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "planted.yaml").write_text(PLANTED)
    engine = f"{ROOT / 'tests' / 'planted_engines.py'}:SplitDropsLast"
    CliRunner().invoke(app, ["run", "planted.yaml", "--engine", engine, "--repro", "out", "-q"])
    (script,) = (tmp_path / "out").glob("*.py")
    assert script.name == "halves.split_1.py"
    assert "engine.split(a0, num_or_sizes=2, axis=1)[1]" in script.read_text()


# -- the stock adapters ----------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["torch", "jax", "autograd"])
def test_the_stock_adapters_pass_the_shipped_cases(spec):
    cases = shipped()
    result = run(cases, load_engine(spec), RunOptions(reference="both"))
    assert [(c.name, c.status) for c in result.cases] == [(c.name, "passed") for c in cases], [
        (c.name, c.message) for c in result.cases if c.status != "passed"
    ]
