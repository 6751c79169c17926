"""The three steps of checking one case, each run where it must run.

* `engine_step`: the engine builds the expression and gives its forward value and
  gradients, and the JVPs and second order the case asks for (`modes`). It runs where
  the engine runs: in a worker process, or in gradcheck's own.
* `verdict` (and `modes.mode_verdict` for the JVPs and second order): the engine's
  numbers against the reference's, under the case's tolerance.
  It runs in gradcheck's own process, always: nothing an engine does decides it.
* `diagnosis_step`: why a failing case fails. Diagnosis probes the engine (localisation
  runs it again on one-op expressions), so it runs where the engine runs, given the
  reference and the verdict.

Every step's result is plain data (`results`, `EngineRun`, `EngineOutcome`), so it can
cross from a worker process to gradcheck's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .cases.model import Case
from .comparison.compare import compare
from .comparison.trust import judged_part, nothing_judged, tolerance
from .diagnosis import Evidence, diagnose
from .diagnosis.conventions import declared_conventions, follow_conventions, note_conventions
from .engines.driver import (
    EngineFailure,
    EngineRun,
    Unsupported,
    call_engine,
    describe,
    traceback_tail,
)
from .engines.protocol import EngineFactory
from .modes import diagnose_mode, run_check
from .results import CaseResult, Hint, InputResult

# The engine calls whose failure the diagnosis explains: it raised differentiating.
DIAGNOSED_CALLS = ("grad", "vjp")


@dataclass
class EngineOutcome:
    """What the engine step gave: its run, or why there is none (unsupported, an error,
    with `what` the engine call that raised)."""

    run: EngineRun | None = None
    unsupported: str | None = None
    unsupported_ops: list[str] = field(default_factory=list)  # the ops it lacks
    error: str | None = None
    traceback: str | None = None
    what: str | None = None
    # The checks beyond reverse mode the case asks for (``jvp``, ``hvp``), each its own.
    checks: dict[str, EngineOutcome] = field(default_factory=dict)

    @property
    def failure(self) -> EngineFailure | None:
        """The error as the diagnosis takes it, when there was one."""
        if self.error is None:
            return None
        return EngineFailure(self.error, self.traceback, self.what)


def engine_step(
    case: Case, factory: EngineFactory, *, ask_twice: bool, checks: Sequence[str] = ("vjp",)
) -> EngineOutcome:
    """`case` through a fresh engine from `factory` for each of `checks` (``vjp``, the
    gradients; ``jvp`` and ``hvp``, `modes`'s, into `EngineOutcome.checks`, unless the
    gradients failed); never raises for the engine."""
    outcome = _step(case, factory, "vjp", ask_twice) if "vjp" in checks else EngineOutcome()
    if "vjp" not in checks or outcome.run is not None:
        outcome.checks = {c: _step(case, factory, c, False) for c in checks if c != "vjp"}
    return outcome


def _step(case: Case, factory: EngineFactory, check: str, ask_twice: bool) -> EngineOutcome:
    try:
        engine = call_engine("creating the engine", factory)
        got = run_check(engine, case, check, ask_twice=ask_twice)
    except Unsupported as unsupported:
        return EngineOutcome(unsupported=str(unsupported), unsupported_ops=unsupported.ops)
    except EngineFailure as failure:
        return EngineOutcome(
            error=failure.message, traceback=failure.traceback_tail, what=failure.what
        )
    except Exception as e:  # what the driver's checks did not foresee is still the engine's
        return EngineOutcome(error=f"the engine raised {describe(e)}", traceback=traceback_tail(e))
    return EngineOutcome(got)


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
    result.message = "; ".join([*reference.notes, *got.notes, *notes, *conventions])
    return reference, stale


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
                f"TensorFlow's gradient for {name} no longer matches the pinned `expect` "
                f"(max abs diff {check.max_abs_diff})"
            )
    return problems


@dataclass
class Known:
    """What diagnosis takes from the run so far: its causes, each with the case it was
    found on (`diagnosis.root_causes.known`), and whether a cause that reproduces a case
    spares it the probes (`brief`, ``--diagnose=first``)."""

    causes: list[tuple[Hint, str]] = field(default_factory=list)
    brief: bool = True


@dataclass
class Diagnose:
    """A failing case's diagnosis, asked of the side that holds its engine and outcome:
    the reference and the verdict (`result`, which gets the hints), the inputs whose
    gradients came back stale, the run's `known` causes, and which failures to explain:
    reverse mode's (`reverse`) and those of the checks beyond it (`modes`: ``jvp``,
    ``hvp``). `cwd` is the run's working directory, for a worker to diagnose in."""

    reference: EngineRun
    result: CaseResult
    stale: list[str] = field(default_factory=list)
    known: Known = field(default_factory=Known)
    reverse: bool = True
    modes: list[str] = field(default_factory=list)
    cwd: str = ""


def diagnosis_step(
    case: Case, outcome: EngineOutcome, factory: EngineFactory, request: Diagnose
) -> list[str]:
    """Attach the hints `request` asks for to `request.result` (in place); the notes of
    diagnosis steps that failed."""
    reference, result, known = request.reference, request.result, request.known
    notes = []
    if request.reverse:
        evidence = Evidence(
            case,
            reference,
            outcome.run,
            result,
            factory,
            request.stale,
            failure=outcome.failure,
            conventions=declared_conventions(factory),
            known=list(known.causes),
            brief=known.brief,
        )
        notes += diagnose(evidence)
    for check in request.modes:
        notes += diagnose_mode(case, factory, reference, result, check, outcome.checks[check])
    return notes


def adopt_diagnosis(result: CaseResult, diagnosed: CaseResult) -> None:
    """Take a worker's diagnosis of `result` (its hints and checked nodes), never its verdict:
    the status and comparisons stay the ones computed here."""
    result.hints = diagnosed.hints
    result.nodes = diagnosed.nodes
    for ours, theirs in ((result.inputs, diagnosed.inputs), (result.jvp, diagnosed.jvp),
                         (result.hvp, diagnosed.hvp)):  # fmt: skip
        by_name = {item.name: item for item in theirs}
        for item in ours:
            if item.name in by_name:
                item.hints = by_name[item.name].hints
