"""The diagnosis step: why a failing case fails. Diagnosis probes the engine
(localisation runs it again on one-op expressions), so it runs where the engine runs,
given the reference and the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cases.model import Case
from ..diagnosis import Evidence, diagnose
from ..diagnosis.mechanisms.conventions import (
    declared_conventions,
)
from ..engines.driver import (
    EngineRun,
)
from ..engines.protocol import EngineFactory
from ..results import CaseResult, Hint
from .engine_step import EngineOutcome
from .modes import diagnose_mode


@dataclass
class Known:
    """What diagnosis takes from the run so far: its causes, each with the case it was
    found on (`diagnosis.run.root_causes.known`), and whether a cause that reproduces a case
    spares it the probes (`brief`, ``--diagnose=first``)."""

    causes: list[tuple[Hint, str]] = field(default_factory=list)
    brief: bool = True


@dataclass
class Diagnose:
    """A failing case's diagnosis, asked of the side that holds its engine and outcome:
    the reference and the verdict (`result`, which gets the hints), the inputs whose
    gradients came back stale, the run's `known` causes, and which failures to explain:
    reverse mode's (`reverse`) and those of the checks beyond it (`modes`: ``jvp``,
    ``hvp``). `cwd` is the run's working directory, for a worker to diagnose in;
    `timeout` the case's, which a case that timed out checks its nodes within."""

    reference: EngineRun
    result: CaseResult
    stale: list[str] = field(default_factory=list)
    known: Known = field(default_factory=Known)
    reverse: bool = True
    modes: list[str] = field(default_factory=list)
    cwd: str = ""
    timeout: float | None = None


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
            timeout=request.timeout,
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
