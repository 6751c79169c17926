"""The verdict: the engine's numbers against the reference's, under the case's
tolerance. It runs in gradcheck's own process, always: nothing an engine does decides it."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from ..cases.model import Case, Tolerance
from ..comparison.compare import compare
from ..comparison.trust import judged_part, nothing_judged, tolerance
from ..diagnosis.mechanisms.conventions import (
    follow_conventions,
    note_conventions,
)
from ..engines.driver import (
    EngineRun,
)
from ..results import CaseResult, InputResult
from .engine_step import EngineOutcome

# The engine calls whose failure the diagnosis explains: it raised differentiating.
DIAGNOSED_CALLS = ("grad", "vjp")


def new_result(case: Case, reference: str) -> CaseResult:
    """`case`'s result before anything is known, to be checked against a `reference` kind."""
    return CaseResult(
        case.name,
        case.file,
        case.line,
        "passed",
        expr=case.expr,
        tags=list(case.tags),
        graph=case.expression.outline(),
        reference=reference,
    )


def error(result: CaseResult, message: str, traceback: str | None = None) -> CaseResult:
    result.status = "error"
    result.message = message
    result.traceback = traceback
    return result


def verdict(
    case: Case,
    reference: EngineRun,
    outcome: EngineOutcome,
    result: CaseResult,
    *,
    strict: bool,
    notes: list[str],
    declared: Mapping[str, str],
    exact: Callable[[], EngineRun | None],
    expect_failed: bool = False,
) -> tuple[EngineRun, list[str]]:
    """Fill `result` from the engine's outcome against the reference.

    The reference is what it can judge (`comparison.trust`), with the conventions the
    adapter `declared` followed; a low-precision case that fails is judged again by its
    distance from `exact()`, the reference's float64 answer. `notes` (the stale check's
    limit, `expect`'s problems) join the message; `expect_failed` fails the case even
    when the engine matched. Returns the reference as it judged the engine, and the
    inputs whose second answer differed from the first (the stale-gradients check).
    """
    got = outcome.run
    if got is None:
        if outcome.unsupported is not None:
            result.status = "failed" if strict else "skipped"
            result.message = f"unsupported: {outcome.unsupported}"
            result.unsupported_ops = list(outcome.unsupported_ops)
        else:
            error(result, outcome.error or "the engine failed", outcome.traceback)
        return reference, []
    result.engine_dtype = got.dtype
    tensorflow = reference = judged_part(reference, got)
    reference, followed = follow_conventions(case, reference, declared)
    _compare_all(result, reference, got, case, None)
    if mismatched(result, []):
        wide = exact()
        if wide is not None:  # low precision: judged by the distance from the exact answer
            _compare_all(result, reference, got, case, wide)
    note_conventions(result.inputs, tensorflow, got, followed, case.tolerance)
    stale = [
        name
        for name, grad in got.grads.items()
        # Within tolerance, not bit for bit: a parallel reduction may round differently.
        if got.grads_again is not None
        and not compare(grad, got.grads_again[name], case.tolerance).passed
    ]
    failed = mismatched(result, stale)
    result.status = "failed" if failed or expect_failed or reference.doubts else "passed"
    if result.status == "passed" and nothing_judged(reference):
        result.status = "skipped"  # the reference could judge no gradient element at all
    passed_by_conventions = not failed and any(item.hints for item in result.inputs)
    conventions = ["passed under the engine's declared conventions"] * passed_by_conventions
    loose = loose_tolerance(case.tolerance, reference)
    result.message = "; ".join([*reference.notes, *got.notes, *notes, *conventions, *loose])
    return reference, stale


LOOSE_RTOL = 0.5  # beyond it, a gradient off by half (or twice too small) passes


def loose_tolerance(tol: Tolerance, reference: EngineRun) -> list[str]:
    """A warning for a tolerance too wide to judge anything: `rtol` over `LOOSE_RTOL`, or
    an `atol` larger than every value of the reference (the gradients' scale)."""
    said = []
    if tol.rtol > LOOSE_RTOL:
        said.append(
            f"warning: rtol {tol.rtol:g} is over {LOOSE_RTOL:g}: a gradient off by half "
            "still passes"
        )
    values = [np.asarray(v, np.float64) for v in (reference.forward, *reference.grads.values())]
    finite = [np.abs(v[np.isfinite(v)]) for v in values if v.size]
    scale = max((float(v.max()) for v in finite if v.size), default=0.0)
    if scale > 0 and tol.atol > scale:
        said.append(
            f"warning: atol {tol.atol:g} is larger than every reference value (at most "
            f"{scale:.3g}): any answer that close passes, however wrong"
        )
    return said


def _compare_all(
    result: CaseResult, reference: EngineRun, got: EngineRun, case: Case, exact: EngineRun | None
) -> None:
    result.forward = compare(
        reference.forward, got.forward, case.tolerance, exact and exact.forward
    )
    result.inputs = [
        InputResult(
            name,
            compare(
                reference.grads[name],
                grad,
                tolerance(case, reference, name),
                exact and exact.grads[name],
            ),
        )
        for name, grad in got.grads.items()
    ]


def mismatched(result: CaseResult, stale: list[str]) -> bool:
    """The engine's numbers differ from the reference's, or from its own second answer:
    what diagnosis explains."""
    return (
        result.forward is not None
        and (not result.forward.passed or any(not i.comparison.passed for i in result.inputs))
    ) or bool(stale)


def to_diagnose(result: CaseResult, outcome: EngineOutcome, stale: list[str]) -> bool:
    """A mismatch, or an engine that raised differentiating: what diagnosis explains."""
    return mismatched(result, stale) or (
        outcome.run is None and outcome.error is not None and outcome.what in DIAGNOSED_CALLS
    )


def expect_problems(case: Case, reference: EngineRun) -> list[str]:
    """`expect` pins the oracle: the reference must still give the pinned gradients."""
    problems = []
    for name, pinned in case.expect.items():
        check = compare(pinned, reference.grads[name], case.tolerance)
        if not check.passed:
            problems.append(
                f"the reference's gradient for {name} no longer matches the pinned `expect` "
                f"(max abs diff {check.max_abs_diff})"
            )
    return problems
