"""Forward mode and second order where the engine runs: in a worker process (the default
for an ``--engine`` spec) a case's JVPs, its gradient of sum(grad * v), their verdict
and their diagnosis are what they are in gradcheck's own process.

The engines are the README's (examples/modes/engines.py: a wrong tanh JVP in the builtin
engine, a PyTorch tanh whose backward leaves the graph), the builtin engine, and the
protocol-breaking ones of engines_for_tests.py, each loaded by its file in the worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engines_for_tests import FILE as TEST_ENGINES
from engines_for_tests import load_cases
from gradcheck.cases import load_file
from gradcheck.results import CaseResult
from gradcheck.runner import RunOptions, default_isolation, run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "modes"


def both_ways(cases, spec: str, **options) -> tuple[CaseResult, CaseResult]:
    """The first case's result with the engine in a worker, then in this process."""
    return tuple(  # type: ignore[return-value]
        run(cases, spec, RunOptions(isolate=isolate, **options)).cases[0]
        for isolate in ("process", "none")
    )


def seen(result: CaseResult) -> tuple:
    """Everything a report says of a case but its timing and captured output."""
    return (
        result.status,
        result.message,
        result.modes,
        result.order,
        [
            (label, i.status, i.consistency and i.consistency.status, [h.code for h in i.hints])
            for label, i in result.labelled_inputs()
        ],
        [(h.code, h.node, h.mechanism, h.message) for h in result.hints],
        [(n.node, n.check, n.status, n.args) for n in result.nodes],
    )


@pytest.mark.parametrize(
    "name, engine, code, mechanism",
    [
        ("tanh_jvp", "TanhJvp", "op-jvp", "formula"),
        ("tanh_hvp", "PlainTanh", "op-hvp", "not-differentiable-backward"),
    ],
)
def test_a_one_mode_bug_is_found_and_explained_in_a_worker_as_here(
    name: str, engine: str, code: str, mechanism: str
) -> None:
    cases = [c for c in load_file(EXAMPLES / "cases.yaml") if c.name == name]
    spec = f"{EXAMPLES / 'engines.py'}:{engine}"
    assert default_isolation(spec) == "process"
    worker, here = both_ways(cases, spec)
    assert worker.status == "failed"
    assert all(i.comparison.passed for i in worker.inputs)  # reverse mode is right
    extra = worker.jvp if name == "tanh_jvp" else worker.hvp
    assert extra and not any(i.comparison.passed for i in extra)
    top = worker.hints[0]
    assert (top.code, top.node, top.mechanism) == (code, "tanh(x @ w)", mechanism)
    assert seen(worker) == seen(here)


def test_a_correct_engine_passes_both_modes_and_second_order_in_a_worker(tmp_path: Path) -> None:
    cases = load_cases(
        tmp_path,
        """
        cases:
          - name: layer
            expr: sum(tanh(x @ w) * b, axis=1)
            cotangent: random
            modes: [rev, fwd]
            order: 2
            inputs: {x: {shape: [2, 3]}, w: {shape: [3, 4]}, b: {shape: [4]}}
        """,
    )
    worker, here = both_ways(cases, "builtin")
    assert worker.status == "passed", worker.message
    assert [i.name for i in worker.jvp] == [i.name for i in worker.hvp] == ["x", "w", "b"]
    assert all(i.consistency and i.consistency.passed for i in worker.jvp)
    assert seen(worker) == seen(here)


@pytest.mark.parametrize(
    "engine, status, message",
    [
        ("NoJvp", "skipped", "unsupported: forward mode (JVPs): engine has no jvp()"),
        ("RaisingJvp", "error", "forward mode (JVPs): "),
    ],
)
def test_what_an_engine_cannot_do_in_forward_mode_is_said_from_a_worker(
    tmp_path: Path, engine: str, status: str, message: str
) -> None:
    cases = load_cases(
        tmp_path,
        """
        cases:
          - name: sine
            expr: sin(x)
            modes: [rev, fwd]
            inputs: {x: {shape: [3]}}
        """,
    )
    worker, here = both_ways(cases, f"{TEST_ENGINES}:{engine}")
    assert worker.status == status
    assert worker.message.startswith(message), worker.message
    assert [i.status for i in worker.inputs] == ["passed"]  # reverse mode still checked
    assert seen(worker) == seen(here)
