"""Second order (``order: 2``): the gradient of sum(grad * v) against TensorFlow's nested
tapes and finite differences, and the diagnosis of backward rules that are right in first
order and wrong in second, named by node and mechanism.

The planted bugs are the two of the issue, each in a real engine (PyTorch, a
``torch.autograd.Function`` whose backward leaves the graph; the tanh one is
examples/modes/engines.py's, the README's) and in the builtin engine (one method
overridden):

* a backward computed with raw NumPy values (mul);
* a tanh VJP that uses the forward output as a plain array, ``g * (1 - y**2)`` with y
  taken out of the graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from engines_for_tests import load_cases
from gradcheck.cases import Case
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.engines.builtin.engine import BuiltinEngine, Tensor
from gradcheck.engines.loading import load_engine
from gradcheck.engines.stock.torch import TorchEngine
from gradcheck.runner import RunOptions, check_case


class NumpyMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = (t.detach().numpy() for t in ctx.saved_tensors)
        g = g.detach().numpy()
        return torch.from_numpy(g * b), torch.from_numpy(g * a)  # computed in NumPy


class TorchNumpyMul(TorchEngine):
    def mul(self, a, b):
        return NumpyMul.apply(a, b)


class BuiltinPlainTanh(BuiltinEngine):
    """create_graph: tanh's VJP reads the output's value, a constant to the graph."""

    def vjp(self, tensor, i, g):
        if isinstance(g, Tensor) and tensor.op.name == "tanh":
            return g * (1 - tensor.value**2)
        return super().vjp(tensor, i, g)


class BuiltinNumpyMul(BuiltinEngine):
    """create_graph: mul's VJP computed on the arrays and handed back as a constant."""

    def vjp(self, tensor, i, g):
        if isinstance(g, Tensor) and tensor.op.name == "mul":
            return Tensor(super().vjp(tensor, i, g.value))
        return super().vjp(tensor, i, g)


TorchPlainTanh = load_engine(str(Path(__file__).parents[1] / "examples/modes/engines.py:PlainTanh"))


class NotHigherOrder(BuiltinEngine):
    name = "first-order-only"
    higher_order = False


def order_two(tmp_path: Path, expr: str, shapes: dict[str, list[int]]) -> Case:
    specs = "".join(f"\n      {name}: {{shape: {shape}}}" for name, shape in shapes.items())
    text = f"cases:\n  - name: second\n    expr: {expr}\n    order: 2\n    inputs:{specs}\n"
    (case,) = load_cases(tmp_path, text)
    return case


TANH = ("sum(tanh(x * y))", {"x": [2, 3], "y": [3]}, "tanh(x * y)")
MUL = ("exp(x) * sin(y)", {"x": [2, 3], "y": [2, 3]}, "exp(x) * sin(y)")


@pytest.mark.parametrize(
    ("engine", "case", "detached_from"),
    [
        (TorchPlainTanh, TANH, "x * y"),
        (BuiltinPlainTanh, TANH, "x * y"),
        (TorchNumpyMul, MUL, "sin(y)"),
        (BuiltinNumpyMul, MUL, "sin(y)"),
    ],
    ids=["torch-tanh", "builtin-tanh", "torch-mul", "builtin-mul"],
)
def test_a_backward_that_leaves_the_graph_is_named_by_node_and_mechanism(
    tmp_path: Path, engine: type, case: tuple, detached_from: str
) -> None:
    expr, shapes, node = case
    result = check_case(order_two(tmp_path, expr, shapes), engine, RunOptions())
    assert result.status == "failed", result.message
    assert all(i.comparison.passed for i in result.inputs)  # right in first order
    assert any(not i.comparison.passed for i in result.hvp)  # wrong in second
    top = result.hints[0]
    assert (top.code, top.node, top.mechanism) == ("op-hvp", node, "not-differentiable-backward")
    assert f"does not depend on {detached_from} as the engine sees it" in top.message
    assert "finite differences of the engine's own VJP" in top.message  # the evidence
    assert [n.node for n in result.nodes if n.status == "failed"] == [node]
    assert all(n.check == "hvp" for n in result.nodes)


def test_each_argument_of_a_detached_mul_is_named(tmp_path: Path) -> None:
    expr, shapes, node = MUL
    result = check_case(order_two(tmp_path, expr, shapes), TorchNumpyMul, RunOptions())
    named = {(h.node, h.arg) for h in result.hints if h.mechanism == "not-differentiable-backward"}
    assert named == {(node, 0), (node, 1)}


def test_an_engine_without_higher_order_is_unsupported_for_order_2(tmp_path: Path) -> None:
    case = order_two(tmp_path, "sin(x) * x", {"x": [3]})
    result = check_case(case, NotHigherOrder, RunOptions())
    assert result.status == "skipped"
    assert "higher_order = True" in result.message
    assert [i.status for i in result.inputs] == ["passed"]
    assert result.hvp == []


def test_the_hessian_vector_product_matches_finite_differences_of_the_gradient(
    tmp_path: Path,
) -> None:
    """The builtin engine's second order on a composite case, against an independent oracle:
    central differences of its own first-order gradient along v, by hand."""
    from gradcheck.engines.reverse import run_engine

    case = order_two(tmp_path, "sum(tanh(x @ w) ** 2, axis=1)", {"x": [2, 3], "w": [3, 4]})
    result = check_case(case, BuiltinEngine, RunOptions(reference="numeric"))
    assert result.status == "passed", result.message
    v, eps = case.directions(), 1e-6

    def grads(step: float) -> dict[str, np.ndarray]:
        moved = {n: case.inputs[n] + step * v[n] for n in case.inputs}
        return run_engine(BuiltinEngine(), case.expression, moved, case.wrt, case.cotangent).grads

    plus, minus = grads(eps), grads(-eps)
    for item in result.hvp:
        assert item.comparison.passed
        fd = (plus[item.name] - minus[item.name]) / (2 * eps)
        np.testing.assert_allclose(item.comparison.engine, fd, rtol=1e-6, atol=1e-8)


def test_a_catalogue_fault_that_shows_at_second_order_alone_is_fingerprinted(
    tmp_path: Path,
) -> None:
    """The seed question's unbroadcast (`broadcast.leading-only`) passes logsumexp's first
    order here (y only gains a leading axis), but logsumexp's VJP broadcasts a kept-dims
    array, which the fault does not sum back once the gradient is differentiated again."""
    case = order_two(tmp_path, "logsumexp(x * y, axis=-1, keepdims=True)", {"x": [3, 4], "y": [4]})
    fault = FAULTS["broadcast.leading-only"]
    result = check_case(case, lambda: FaultyEngine(fault), RunOptions())
    assert result.status == "failed", result.message
    assert all(i.comparison.passed for i in result.inputs)  # right in first order
    assert result.hints[0].code == fault.code and result.hints[0].confidence == "exact"
    assert all(i.hints[0].code == fault.code for i in result.hvp if not i.comparison.passed)
    right = check_case(case, BuiltinEngine, RunOptions())  # and the builtin engine passes it
    assert right.status == "passed", right.message


def test_a_catalogue_fault_that_makes_second_order_raise_is_named_not_a_detached_backward(
    tmp_path: Path,
) -> None:
    """The seed question's unbroadcast passes this first order (nothing broadcasts), but
    sum's VJP broadcasts g, which depends on x here, back to x's shape; differentiated
    again, the faulty unbroadcast leaves that broadcast's gradient (2, 4) where g is (2,),
    and the reshape after it raises. sum's VJP is differentiable: its values are right and
    move with g, and it raises, but it is not `not-differentiable-backward`. The one shared
    step is wrong, and the faults that raise where the engine does are named, as likely."""
    case = order_two(tmp_path, "square(sum(x, axis=1))", {"x": [2, 4]})
    fault = FAULTS["broadcast.leading-only"]
    result = check_case(case, lambda: FaultyEngine(fault), RunOptions())
    assert result.status == "error", result.message
    assert "grad of sum(grad * v) raised" in result.message  # at second order only
    assert all(i.comparison.passed for i in result.inputs)
    raising = [h for h in result.hints if h.code.startswith("fault:")]
    assert fault.code in {h.code for h in raising}
    assert all(h.confidence == "likely" and "at second order" in h.message for h in raising)
    assert result.hints[0] in raising
    nodes = [h for h in result.hints if h.code == "op-hvp"]
    assert nodes and all(h.mechanism.startswith("fault:broadcast.") for h in nodes)
    assert not any(h.mechanism == "not-differentiable-backward" for h in result.hints)
    right = check_case(case, BuiltinEngine, RunOptions())
    assert right.status == "passed", right.message
