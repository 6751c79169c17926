"""TensorFlow's reference traced once a case structure recurs (`references.traced`): the
same answer as the eager reference, bit for bit, or the eager reference itself."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import Case
from gradcheck.cases.loader import load_case
from gradcheck.engines.checks import run_check
from gradcheck.ops.user import load_ops_files
from gradcheck.references import traced
from gradcheck.references.computed import computed_reference
from gradcheck.references.tensorflow import TensorFlowEngine

# A builder that computes differently when traced than eagerly: only the comparison of
# the first traced result with the eager one can tell, and it must keep the eager one.
OPS = """
import gradcheck

@gradcheck.op(
    shape=gradcheck.same_shape,
    vjps=[lambda g, ans, x: 2.0 * g],
    tf=lambda tf, x: x * (2.0 if tf.executing_eagerly() else 3.0),
)
def doubled_for_traced_test(x):
    return 2.0 * x
"""


def new_case(expr: str, seed: int) -> Case:
    inputs = {"x": {"shape": [3, 4]}, "w": {"shape": [4, 2]}}
    case = load_case(
        {
            "name": "c",
            "expr": expr,
            "dtype": "float64",
            "inputs": inputs,
            "seed": seed,
            "cotangent": "random",
        }
    )
    assert isinstance(case, Case), case
    return case


def eager(case: Case):
    return run_check(TensorFlowEngine(), case, "vjp")


def assert_same(got, expected) -> None:
    assert got.forward.tobytes() == expected.forward.tobytes()
    assert got.grads.keys() == expected.grads.keys()
    for name in got.grads:
        assert got.grads[name].dtype == expected.grads[name].dtype
        assert got.grads[name].tobytes() == expected.grads[name].tobytes()


@pytest.fixture
def trace_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traced, "TRACE_AFTER", 2)


def test_a_recurring_structure_is_traced_and_answers_as_the_eager_reference(
    trace_soon: None,
) -> None:
    expr = "sum(tanh(x @ w) * 2.0, axis=1)"
    key = traced._key(new_case(expr, 0))
    for seed in range(6):  # new values each time, as a fuzz run's or a watch's checks
        case = new_case(expr, seed)
        assert_same(computed_reference(case, "tensorflow"), eager(case))
    assert traced._traced[key] is not None  # traced, and its answer taken since


def test_a_structure_whose_traced_result_differs_stays_eager(
    trace_soon: None, tmp_path: Path
) -> None:
    ops = tmp_path / "traced_ops.py"
    ops.write_text(textwrap.dedent(OPS))
    load_ops_files([ops])
    expr = "doubled_for_traced_test(x) @ w"
    key = traced._key(new_case(expr, 0))
    for seed in range(5):
        case = new_case(expr, seed)
        got = computed_reference(case, "tensorflow")
        assert_same(got, eager(case))
        np.testing.assert_allclose(got.forward, 2.0 * case.inputs["x"] @ case.inputs["w"])
    assert key in traced._traced and traced._traced[key] is None


def test_a_gradient_at_an_intermediate_node_is_never_traced(trace_soon: None) -> None:
    case = load_case(
        {
            "name": "c",
            "expr": "h = exp(x)\nsum(h * 2.0)",
            "dtype": "float64",
            "cotangent": "ones",
            "inputs": {"x": {"shape": [3]}},
            "wrt": ["x", "h"],
        }
    )
    assert isinstance(case, Case)
    assert traced._key(case) is None
    for _ in range(4):
        reference = computed_reference(case, "tensorflow")
        np.testing.assert_allclose(reference.grads["h"], 2.0)
