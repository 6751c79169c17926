"""Diagnosis: say why a failing case's gradients differ from the reference (SPEC §6).

`diagnose` fills a failing `CaseResult` with hints, strongest first. An analysis that
raises is dropped with a note; diagnosis never turns a failure into a crash.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cases.model import Case
from ..engines.driver import EngineRun
from ..engines.protocol import EngineFactory
from ..results import CaseResult, Hint


@dataclass
class Evidence:
    """Everything known about one failing case."""

    case: Case
    reference: EngineRun
    engine: EngineRun
    result: CaseResult
    engine_factory: EngineFactory
    stale: list[str]


def diagnose(evidence: Evidence) -> list[str]:
    """Attach hints to `evidence.result`; return notes about analyses that failed."""
    result = evidence.result
    if result.forward is not None and not result.forward.passed:
        result.hints.append(
            Hint(
                "forward-mismatch",
                f"the forward values already differ (max abs diff {result.forward.max_abs_diff})",
                "fix the forward pass first: gradients of a wrong value cannot match",
                "exact",
                node=evidence.case.expression.output.text,
            )
        )
    if evidence.stale:
        names = ", ".join(evidence.stale)
        result.hints.append(
            Hint(
                "stale-gradients",
                f"asking the engine twice for the gradient of {names} gave different answers",
                "reset accumulated gradients before each backward pass (zero_grad), "
                "or build a fresh tape per call",
                "exact",
            )
        )
    return []
