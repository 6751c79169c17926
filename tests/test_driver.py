"""Driver localisation (SPEC §6.1 `backprop-driver`) beyond the corpus: a functional engine,
whose intermediate gradients gradcheck computes itself by cutting the graph; an engine
that refuses them; a driver bug beside a rule that fails alone; the stories' arithmetic.

The planted driver bugs of the corpus (tests/corpus/, test_corpus.py) are the main test:
each mechanism in a tape and a closure engine, modelled on real engines' reports.
"""

from __future__ import annotations

import numpy as np
import pytest

from corpus import CASES, ROOT
from gradcheck.cases import Case, load_file
from gradcheck.cases.selection import matches
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.results import CaseResult
from gradcheck.runner import RunOptions, run


def corpus_case(name: str) -> Case:
    [case] = [c for c in load_file(ROOT / CASES / "backprop.yaml") if matches(name, c.name, [])]
    assert isinstance(case, Case)
    return case


def check(case: Case, factory) -> CaseResult:
    [result] = run([case], factory, RunOptions()).cases
    return result


class Box:
    """A value of the functional engine below, and how to send a gradient to its inputs."""

    def __init__(self, value, parents=()) -> None:
        self.value = np.asarray(value)
        self.parents = list(parents)  # (input box, local vjp)


def _v(x):
    return x.value if isinstance(x, Box) else np.asarray(x)


class Functional:
    """A functional engine (SPEC §4: `vjp(fn, primals, cotangent)`, no `grad`) with its own
    small backward pass; `accumulate = False` plants `=` for `+=` at a fan-out."""

    name = "functional"
    accumulate = True

    def value(self, node):
        return _v(node)

    def _apply(self, value, *uses):
        parents = [(a, f) for a, f in uses if isinstance(a, Box)]
        return Box(value, parents) if parents else value

    def mul(self, a, b):
        return self._apply(_v(a) * _v(b), (a, lambda g: g * _v(b)), (b, lambda g: g * _v(a)))

    def add(self, a, b):
        return self._apply(_v(a) + _v(b), (a, lambda g: g), (b, lambda g: g))

    def exp(self, x):
        y = np.exp(_v(x))
        return self._apply(y, (x, lambda g: g * y))

    def sin(self, x):
        return self._apply(np.sin(_v(x)), (x, lambda g: g * np.cos(_v(x))))

    def sum(self, x, axis=None, keepdims=False):
        shape = _v(x).shape
        return self._apply(np.sum(_v(x)), (x, lambda g: np.broadcast_to(g, shape)))

    def vjp(self, fn, primals, cotangent):
        leaves = [Box(p) for p in primals]
        out = fn(*leaves)
        order, seen = [], set()

        def visit(box):
            if id(box) not in seen:
                seen.add(id(box))
                for parent, _ in box.parents:
                    visit(parent)
                order.append(box)

        visit(out)
        grads = {id(out): np.asarray(cotangent)}
        for box in reversed(order):
            g = grads.get(id(box))
            for parent, local in box.parents:
                share = local(g)
                old = grads.get(id(parent))
                grads[id(parent)] = share if old is None or not self.accumulate else old + share
        return [grads.get(id(leaf), np.zeros_like(leaf.value)) for leaf in leaves]


class FunctionalOverwrite(Functional):
    accumulate = False


def test_the_correct_functional_engine_passes_the_driver_cases_without_hints():
    for name in ("fan_out_through_exp", "reused_after_exp", "shared_non_leaf"):
        result = check(corpus_case(name), Functional)
        assert (result.status, result.hints) == ("passed", []), name


def test_a_functional_engine_driver_bug_is_located_from_the_cut_graphs():
    result = check(corpus_case("reused_after_exp"), FunctionalOverwrite)
    top = result.hints[0]
    assert (top.code, top.mechanism, top.node) == ("backprop-driver", "no-accumulate", "exp(x)")
    assert all(n.status == "passed" for n in result.nodes)


class LeafGradsOnly(BuiltinEngine):
    """The builtin engine with a fan-out that subtracts (no fingerprint knows it), which,
    like PyTorch without `retain_grad`, gives no gradient for an intermediate node."""

    def accumulate(self, grads, arg, share):
        grads[arg] = share if arg not in grads else grads[arg] - share

    def grad(self, output, wrt, cotangent):
        if any(t.op is not None for t in wrt):
            raise RuntimeError("grad is kept for leaves only")
        return super().grad(output, wrt, cotangent)


def test_without_intermediate_gradients_the_hint_is_todays_with_why_it_is_less_precise():
    result = check(corpus_case("reused_after_exp"), LeafGradsOnly)
    top = result.hints[0]
    assert (top.code, top.mechanism, top.node) == ("backprop-driver", "unknown", None)
    assert "less precise" in top.message and "grad is kept for leaves only" in top.message


class TanhIgnoresUpstreamAndOverwrites(BuiltinEngine):
    """Two bugs: tanh's VJP ignores its cotangent, and a fan-out keeps one share."""

    def vjp(self, tensor, i, g):
        if tensor.op.name == "tanh":
            g = np.ones_like(g)
        return super().vjp(tensor, i, g)

    def accumulate(self, grads, arg, share):
        grads[arg] = share


def test_a_driver_bug_beside_a_node_that_fails_alone_is_named_too(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(
        "cases:\n  - name: two\n    cotangent: random\n    expr: tanh(y) + x * exp(x)\n"
        "    inputs:\n      x: {shape: [3]}\n      y: {shape: [3]}\n"
    )
    [case] = load_file(path)
    result = check(case, TanhIgnoresUpstreamAndOverwrites)
    by_code = {h.code: h for h in result.hints}
    assert by_code["op-vjp"].op == "tanh"
    driver = by_code["backprop-driver"]
    assert (driver.mechanism, driver.node) == ("no-accumulate", "x")
    assert driver.message.startswith("besides the nodes that fail alone")


@pytest.mark.parametrize("name", ["fan_out_through_exp", "reused_after_exp", "shared_non_leaf"])
def test_the_correct_builtin_engine_gets_no_driver_hint(name):
    assert check(corpus_case(name), BuiltinEngine).hints == []
