"""What a case checks beyond reverse mode: forward mode (``modes: [rev, fwd]``) and second
order (``order: 2``).

Forward mode compares the engine's JVP along each input's seeded tangent with the
reference's (`EngineRun.jvp`: TensorFlow's `ForwardAccumulator`, or finite differences);
where reverse mode ran too, it also holds the two modes to each other,
``<vjp(u), t> = <u, jvp(t)>`` for the case's cotangent ``u`` and each input's tangent
``t``, which any correct engine satisfies whatever the reference says. Second order
compares the gradient of ``sum(grad * v)`` with respect to each input, ``v`` its seeded
direction (`EngineRun.hvp`: TensorFlow's nested tapes, or finite differences of the
registry's gradient). Results go to `CaseResult.jvp` and `CaseResult.hvp`, one
`InputResult` per input in `wrt` (the bindings in `wrt` are checked in reverse mode
only); failures are explained by `diagnosis.modes.forward` and `diagnosis.modes.second_order`.

The three steps of `checking` apply to each extra check: the engine's runs
(`run_check`, one fresh engine each, in `checking.engine_step`) and their diagnosis
(`diagnose_mode`) run where the engine runs, a worker process or this one; the verdict
(`mode_verdict`) runs in gradcheck's own process, always.

An engine without ``jvp`` (forward mode) or ``higher_order = True`` (second order) is
unsupported for such a case: what it can do is still checked, and the case is skipped
(failed with ``--strict``) if that all passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..cases.dtypes import LOW_PRECISION
from ..cases.model import MODES, ORDERS, Case
from ..comparison.compare import compare
from ..comparison.trust import judged_part, tolerance
from ..engines.driver import EngineRun, describe
from ..engines.protocol import EngineFactory
from ..results import CaseResult, Consistency, Hint, InputResult

if TYPE_CHECKING:
    from .engine_step import EngineOutcome

# What each extra check is called in messages.
CHECKS = {"jvp": "forward mode (JVPs)", "hvp": "second order (gradient of sum(grad * v))"}


def run_defaults(modes: Sequence[str] | str, order: int) -> tuple[tuple[str, ...], int]:
    """``--modes rev,fwd`` and ``--order 2`` (or the Python API's), checked: what cases that
    say none are checked in."""
    from ..errors import UsageError

    chosen = tuple(modes.split(",") if isinstance(modes, str) else modes)
    if not chosen or any(m not in MODES for m in chosen) or len(set(chosen)) != len(chosen):
        raise UsageError(
            f"modes must be {', '.join(MODES)} or both (rev,fwd), without repeats; got {modes!r}"
        )
    if order not in ORDERS:
        raise UsageError(f"order must be 1 or 2, got {order!r}")
    return chosen, order


def requested(case: Case, modes: Sequence[str], order: int) -> tuple[tuple[str, ...], int]:
    """The modes and the order `case` is checked in: its own, else the run's (`modes`,
    `order`)."""
    return case.modes or tuple(modes), case.order or order


def checks(case: Case, modes: Sequence[str], order: int) -> list[str]:
    """What `case` is checked for, in order: ``vjp`` (reverse mode, the gradients), ``jvp``
    (forward mode), ``hvp`` (second order); `modes` and `order` are the run's."""
    modes, order = requested(case, modes, order)
    found = [check for mode, check in (("rev", "vjp"), ("fwd", "jvp")) if mode in modes]
    return found + (["hvp"] if order == 2 else [])


def mode_verdict(
    case: Case,
    reference: EngineRun,
    outcome: EngineOutcome,
    result: CaseResult,
    *,
    modes: Sequence[str],
    order: int,
    strict: bool,
    exact: Callable[[str], EngineRun | None],
) -> list[str]:
    """Fill `result` (its status too) from the extra checks' outcomes (`outcome.checks`)
    against the reference's (`modes`, `order`: the run's; `strict`: unsupported fails;
    `exact(check)`: a low-precision case's float64 reference). The message gets what the
    report should say, a reason to skip or an engine's error first. Returns the checks to
    diagnose (`diagnose_mode`)."""
    modes, result.order = requested(case, modes, order)
    result.modes = list(modes)
    notes = [result.message] if result.message else []
    unsupported: list[str] = []
    to_diagnose: list[str] = []
    rev = outcome.run
    for check, step in outcome.checks.items():
        if step.unsupported is not None:
            unsupported.append(f"{CHECKS[check]}: {step.unsupported}")
            continue
        if step.run is None:  # the engine raised
            result.status = "error"
            notes.insert(0, f"{CHECKS[check]}: {step.error or 'the engine failed'}")
            result.traceback = result.traceback or step.traceback
            to_diagnose.append(check)
            continue
        got = step.run
        want = judged_part(getattr(reference, check), got)
        setattr(result, check, _compare(case, want, got))
        if _failing(getattr(result, check)) and case.dtype in LOW_PRECISION:
            exact_run = (
                None if case.tolerance_given else exact(check)
            )  # judged by the distance from it, as VJPs
            setattr(result, check, _compare(case, want, got, exact_run))
        if result.forward is None:  # no reverse mode: the forward value is compared here
            result.forward = compare(want.forward, got.forward, case.tolerance)
            result.engine_dtype = got.dtype
            if not result.forward.passed:
                result.hints.append(_forward_hint(result.forward.max_abs_diff, case))
        if check == "jvp" and rev is not None:
            _consistency(case, rev, got, result.jvp)
        notes += [*want.notes, *got.notes]
        result.hints += want.doubts
        if _failing(getattr(result, check)) or not result.forward.passed:
            if result.status != "error":
                result.status = "failed"
            # A wrong forward value, reverse mode's diagnosis already says: fix it first.
            if rev is None or result.forward.passed:
                to_diagnose.append(check)
    bindings = [name for name in case.wrt if name not in case.sources]
    if bindings and ("fwd" in result.modes or result.order == 2):
        notes.append(
            f"forward mode and second order differentiate the inputs in wrt; "
            f"{', '.join(bindings)} only in reverse mode"
        )
    if unsupported and result.status == "passed":
        result.status = "failed" if strict else "skipped"
        notes.insert(0, "unsupported: " + "; ".join(unsupported))
    elif unsupported:
        notes.append("not checked: " + "; ".join(unsupported))
    result.message = "; ".join(notes)
    return to_diagnose


def _compare(
    case: Case, want: EngineRun, got: EngineRun, exact: EngineRun | None = None
) -> list[InputResult]:
    return [
        InputResult(
            name,
            compare(
                want.grads[name], grad, tolerance(case, want, name), exact and exact.grads[name]
            ),
        )
        for name, grad in got.grads.items()
    ]


def _failing(items: Sequence[InputResult]) -> bool:
    return any(
        not item.comparison.passed or (item.consistency and not item.consistency.passed)
        for item in items
    )


def _consistency(case: Case, rev: EngineRun, fwd: EngineRun, items: list[InputResult]) -> None:
    """``<vjp(u), t>`` against ``<u, jvp(t)>`` for each input both modes gave an answer for.

    If every element of both is within the case's tolerance of the truth, the two dots
    differ by at most ``sum((atol + rtol |grad|) |t|) + sum((atol + rtol |jvp|) |u|)``:
    that is the bound, so an inconsistency is always a real error in one mode or both.
    """
    tangents, u = case.tangents(), np.asarray(case.cotangent, np.float64)
    rtol, atol = case.tolerance.rtol, case.tolerance.atol
    for item in items:
        grad, jvp = rev.grads.get(item.name), fwd.grads[item.name]
        t = np.asarray(tangents[item.name], np.float64)
        if grad is None or grad.shape != t.shape or jvp.shape != u.shape:
            continue  # a shape already fails the comparison
        grad, jvp = np.asarray(grad, np.float64), np.asarray(jvp, np.float64)
        with np.errstate(all="ignore"):
            vjp_dot, jvp_dot = float(np.vdot(grad, t)), float(np.vdot(u, jvp))
            bound = float(
                np.sum((atol + rtol * np.abs(grad)) * np.abs(t))
                + np.sum((atol + rtol * np.abs(jvp)) * np.abs(u))
            )
        close = abs(vjp_dot - jvp_dot) <= bound or (np.isnan(vjp_dot) and np.isnan(jvp_dot))
        item.consistency = Consistency("passed" if close else "failed", vjp_dot, jvp_dot, bound)


def _forward_hint(diff: float | None, case: Case) -> Hint:
    return Hint(
        "forward-mismatch",
        f"the forward values already differ (max abs diff {diff})",
        "fix the forward pass first: derivatives of a wrong value cannot match; compare "
        "`value(node)` with the reference's op by op (the nodes checked alone say which)",
        "exact",
        node=case.expression.output.text,
    )


def diagnose_mode(
    case: Case,
    engine_factory: EngineFactory,
    reference: EngineRun,
    result: CaseResult,
    check: str,
    step: EngineOutcome,
) -> list[str]:
    """Explain what failed in `check` (`step`: its engine outcome), into `result`; it runs
    where the engine runs. A diagnosis that raises is a note, never a crash."""
    from ..diagnosis.evidence import ModeEvidence
    from ..diagnosis.modes.forward import diagnose_jvp
    from ..diagnosis.modes.second_order import diagnose_hvp

    diagnose = diagnose_jvp if check == "jvp" else diagnose_hvp
    evidence = ModeEvidence(case, engine_factory, reference, result, step.run, step.failure)
    try:
        hints = diagnose(evidence)
    except Exception as e:  # a diagnosis bug must not hide the failure itself
        return [f"diagnosis of {CHECKS[check]} failed ({describe(e)})"]
    result.hints += hints
    return []
