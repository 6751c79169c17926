"""Functional engines (vjp instead of leaf/constant/grad) and scalar-only engines (SPEC §4).

The engines here are the builtin engine seen through each protocol variant, so any
difference from the builtin engine's own results is the driver's doing.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from engines_for_tests import load_cases
from gradcheck.cases import Case, load_paths
from gradcheck.engines.builtin.engine import BuiltinEngine, Tensor
from gradcheck.engines.loading import load_engine
from gradcheck.engines.reverse import run_engine
from gradcheck.errors import UsageError
from gradcheck.ops import has_op
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parents[1]
NUMERIC = RunOptions(reference="numeric")  # the engines are what is tested here


def shipped() -> list[Case]:
    return [c for c in load_paths([ROOT / "cases"]) if isinstance(c, Case)]


class SubSignBuiltin(BuiltinEngine):
    """A catalogue bug: sub's VJP for b forgets the sign."""

    def vjp_rule(self, op, i):
        if op.name == "sub" and i == 1:
            return lambda g, ans, a, b: g
        return super().vjp_rule(op, i)


class FunctionalBuiltin:
    """The builtin engine behind the functional protocol: `vjp(fn, primals, cotangent)`
    (at second order on its own Tensors, when gradcheck differentiates the gradient), the
    functional `jvp(fn, primals, tangents)`, its op methods, `constant` and `value`, and no
    `leaf` or `grad`."""

    name = "functional-builtin"
    tape = BuiltinEngine
    higher_order = True
    calls: ClassVar[list[tuple[object, int]]] = []

    def __init__(self) -> None:
        self.inner = self.tape()

    def __getattr__(self, name: str):
        if has_op(name) or name in ("constant", "value"):
            return getattr(self.inner, name)
        raise AttributeError(name)

    def _leaves(self, primals) -> list[Tensor]:
        # Inside gradcheck's differentiation of the gradient, the primals are Tensors.
        return [p if isinstance(p, Tensor) else Tensor(np.array(p), requires_grad=True)
                for p in primals]  # fmt: skip

    def vjp(self, fn, primals, cotangent, create_graph=False):
        type(self).calls.append((fn, len(primals)))
        leaves = self._leaves(primals)
        return self.inner.grad(fn(*leaves), leaves, cotangent, create_graph=create_graph)

    def jvp(self, fn, primals, tangents):
        leaves = self._leaves(primals)
        return self.inner.jvp(fn(*leaves), leaves, tangents)


class FunctionalSubSign(FunctionalBuiltin):
    tape = SubSignBuiltin


class ScalarOnly(BuiltinEngine):
    """Differentiates scalars only: gradcheck must hand it sum(output * cotangent)."""

    name = "scalar-only"
    scalar_only = True
    seen: ClassVar[list[str]] = []

    def grad(self, output, wrt, cotangent, create_graph=False):
        assert output.value.shape == () and np.all(cotangent == 1), "not a scalar target"
        type(self).seen.append(output.op.name)
        return super().grad(output, wrt, cotangent, create_graph)


class FunctionalScalarOnly(FunctionalBuiltin):
    scalar_only = True

    def vjp(self, fn, primals, cotangent, create_graph=False):
        assert np.shape(cotangent) == () and cotangent == 1
        return super().vjp(fn, primals, cotangent, create_graph)


@pytest.mark.parametrize("engine", [FunctionalBuiltin, ScalarOnly, FunctionalScalarOnly])
def test_every_shipped_case_passes_through_each_protocol(engine) -> None:
    cases = shipped()
    result = run(cases, engine, NUMERIC)
    assert [(c.name, c.status) for c in result.cases] == [(c.name, "passed") for c in cases], [
        (c.name, c.message) for c in result.cases if c.status != "passed"
    ]


def test_scalar_only_engines_get_the_loss_built_from_their_own_ops() -> None:
    ScalarOnly.seen.clear()
    (case,) = [c for c in shipped() if c.name == "seed_batched_matmul_chain"]
    run_engine(ScalarOnly(), case.expression, case.inputs, case.wrt, case.cotangent)
    assert ScalarOnly.seen == ["sum"]  # sum(mul(output, constant(cotangent)))


def test_a_scalar_only_engine_without_mul_is_unsupported() -> None:
    class NoMul(ScalarOnly):
        mul = None

    (case,) = [c for c in shipped() if c.name == "seed_batched_matmul_chain"]
    result = run([case], NoMul, NUMERIC)
    assert result.cases[0].status == "skipped"
    assert "engine has no method for mul" in result.cases[0].message


def test_intermediate_nodes_are_cut_out_by_gradcheck(tmp_path: Path) -> None:
    (case,) = load_cases(
        tmp_path,
        """
        cases:
          - name: cut
            expr: |
              h = x * y
              k = exp(h) + h
              sum(k * h, axis=0)
            inputs: {x: {shape: [2, 3]}, y: {shape: [2, 3]}}
            wrt: [x, h, k]
            cotangent: random
        """,
    )
    FunctionalBuiltin.calls.clear()
    got = run_engine(
        FunctionalBuiltin(), case.expression, case.inputs, case.wrt, case.cotangent, ask_twice=True
    )
    want = run_engine(BuiltinEngine(), case.expression, case.inputs, case.wrt, case.cotangent)
    for name in case.wrt:
        np.testing.assert_allclose(got.grads[name], want.grads[name], rtol=1e-12)
        np.testing.assert_array_equal(got.grads_again[name], got.grads[name])
    # One call for the inputs, one per intermediate node; asked twice with the same functions.
    first, second = FunctionalBuiltin.calls[:3], FunctionalBuiltin.calls[3:]
    assert [n for _, n in first] == [1, 1, 1]
    assert [fn for fn, _ in first] == [fn for fn, _ in second]
    assert first[0][0].__doc__.endswith("as a function of x")


def test_a_functional_engines_bug_is_diagnosed() -> None:
    (case,) = [c for c in shipped() if c.name == "sub_both_broadcast"]
    result = run([case], FunctionalSubSign, NUMERIC)
    outcome = result.cases[0]
    assert outcome.status == "failed"
    assert outcome.hints[0].code == "fault:sub.sign"
    assert any(n.op == "sub" and n.status == "failed" for n in outcome.nodes)


def test_loading_accepts_a_functional_engine_and_says_what_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "engines.py"
    path.write_text(
        "class Functional:\n    def vjp(self, fn, primals, cotangent): ...\n"
        "class Neither:\n    def value(self, node): ...\n"
    )
    assert load_engine(f"{path}:Functional").__name__ == "Functional"
    with pytest.raises(UsageError, match=r"has no leaf\(\) method .*implements vjp\(\)"):
        load_engine(f"{path}:Neither")
