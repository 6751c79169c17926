"""The pipeline one case flows through: reference and engine runs, comparison, diagnosis.

`check_case` turns a loaded case into a `CaseResult`; `run` does it for a list of cases
and never lets one case's trouble stop the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .cases.model import Case, InvalidCase
from .comparison.compare import compare
from .diagnosis import Evidence, diagnose
from .engines.adapters import engine_name
from .engines.driver import EngineFailure, EngineRun, Unsupported, run_engine
from .engines.protocol import EngineFactory
from .engines.tensorflow import TensorFlowEngine, reference_name
from .results import CaseResult, InputResult, RunResult


@dataclass(frozen=True)
class RunOptions:
    strict: bool = False  # an unsupported case fails instead of being skipped
    fail_fast: bool = False
    diagnose: bool = True


def reference_run(case: Case) -> EngineRun:
    """TensorFlow's forward value and gradients for `case`."""
    return run_engine(TensorFlowEngine(), case.expression, case.inputs, case.wrt, case.cotangent)


def check_case(
    case: Case, engine_factory: EngineFactory, options: RunOptions = RunOptions()
) -> CaseResult:
    started = time.perf_counter()
    result = CaseResult(
        case.name, case.file, case.line, "passed", expr=case.expr, tags=list(case.tags)
    )
    try:
        _check(case, engine_factory, options, result)
    finally:
        result.duration_s = time.perf_counter() - started
    return result


def _check(
    case: Case, engine_factory: EngineFactory, options: RunOptions, result: CaseResult
) -> None:
    try:
        reference = reference_run(case)
    except EngineFailure as failure:
        _error(result, f"TensorFlow could not compute the reference: {failure.message}", failure)
        return
    expect_problems = _check_expect(case, reference)
    try:
        got = run_engine(
            engine_factory(), case.expression, case.inputs, case.wrt, case.cotangent, ask_twice=True
        )
    except Unsupported as unsupported:
        result.status = "failed" if options.strict else "skipped"
        result.message = f"unsupported: {unsupported}"
        return
    except EngineFailure as failure:
        _error(result, failure.message, failure)
        return
    except Exception as e:  # the engine's constructor
        _error(result, f"creating the engine raised {type(e).__name__}: {e}", EngineFailure(str(e)))
        return

    result.forward = compare(reference.forward, got.forward, case.tolerance)
    result.inputs = [
        InputResult(name, compare(reference.grads[name], grad, case.tolerance))
        for name, grad in got.grads.items()
    ]
    stale = [
        name
        for name, grad in got.grads.items()
        if got.grads_again is not None
        and not np.array_equal(grad, got.grads_again[name], equal_nan=True)
    ]
    notes = [*got.notes, *expect_problems]
    failed = (
        not result.forward.passed or any(not i.comparison.passed for i in result.inputs) or stale
    )
    result.status = "failed" if failed or expect_problems else "passed"
    if failed:
        evidence = Evidence(case, reference, got, result, engine_factory, stale)
        notes += diagnose(evidence) if options.diagnose else []
    result.message = "; ".join(notes)


def _check_expect(case: Case, reference: EngineRun) -> list[str]:
    """`expect` pins the oracle: TensorFlow must still give the pinned gradients."""
    problems = []
    for name, pinned in case.expect.items():
        check = compare(pinned, reference.grads[name], case.tolerance)
        if not check.passed:
            problems.append(
                f"TensorFlow's gradient for {name} no longer matches the pinned `expect` "
                f"(max abs diff {check.max_abs_diff})"
            )
    return problems


def _error(result: CaseResult, message: str, failure: EngineFailure) -> None:
    result.status = "error"
    result.message = message
    result.traceback = failure.traceback_tail


def run(
    items: Sequence[Case | InvalidCase],
    engine_factory: EngineFactory,
    options: RunOptions = RunOptions(),
    on_result: Callable[[CaseResult], None] | None = None,
) -> RunResult:
    """Check every case in order; invalid ones are reported as they are, never run."""
    started = time.perf_counter()
    results: list[CaseResult] = []
    for item in items:
        if isinstance(item, InvalidCase):
            outcome = CaseResult(
                item.name, item.file, item.line, "invalid", expr=item.expr, message=item.message
            )
        else:
            outcome = check_case(item, engine_factory, options)
        results.append(outcome)
        if on_result:
            on_result(outcome)
        if options.fail_fast and outcome.status in ("failed", "error"):
            break
    ran_reference = any(isinstance(i, Case) for i in items)
    return RunResult(
        engine=engine_name(engine_factory),
        reference=reference_name() if ran_reference else "tensorflow",
        cases=results,
        duration_s=time.perf_counter() - started,
    )
