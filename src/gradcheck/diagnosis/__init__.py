"""Diagnosis: say why a failing case's gradients differ from the reference (SPEC §6).

`diagnose` runs, in order: the value and shape patterns of each failing input,
localisation (every op node checked alone) with the mechanism probes of each failing
node (`mechanisms.py`) or, at a kink, the convention the engine follows
(`conventions.py`), and the fault fingerprints relevant to what localisation found.
When every node passes alone, `driver.py` finds where the backward driver goes wrong.
When the engine raised, `errors.py` localises the error instead. The hints are ranked
and folded (`ranking.py`). A step that raises is dropped with a note; diagnosis never
turns a failure into a crash. Under `--diagnose=first` a case that a fingerprint found
on an earlier case reproduces is spared the probes.

After the run, `diagnose_run` groups the failing cases by root cause
(`root_causes.py`) and makes the engine's report card (`report_card.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..cases.model import Case
from ..engines.driver import describe
from ..ops.broadcast import fmt_shape
from ..ops.reductions import reduced_size
from ..results import CaseResult, Hint, RunResult
from . import idiom
from .evidence import Evidence
from .faults.fingerprints import case_fingerprints
from .faults.planted import FAULTS
from .localisation.driver import FIXES, driver_hint, stale_node, unexplained
from .localisation.localise import NodeCheck, check_nodes
from .mechanisms import dtypes
from .mechanisms.conventions import kink_hint, observe
from .mechanisms.errors import diagnose_error, raising_too
from .mechanisms.findings import node_forward_hint, op_vjp_hint
from .mechanisms.kinks import kink_mask
from .mechanisms.patterns import ANALYSES, Subject
from .mechanisms.probes import Prober
from .mechanisms.stateful import stateful_hints
from .run.brief import brief_note, known_hints
from .run.ranking import dedupe, fold, rank, rank_beside_bug
from .run.report_card import report_card
from .run.root_causes import cite, root_causes

Step = Callable[[], list[Hint]]


def diagnose(evidence: Evidence) -> list[str]:
    """Attach hints to `evidence.result`; return notes about steps that failed."""
    notes: list[str] = []

    def attempt(step: str, fn: Step) -> list[Hint]:
        try:
            return fn()
        except Exception as e:  # a diagnosis bug must not hide the failure itself
            notes.append(f"diagnosis step {step!r} failed ({describe(e)})")
            return []

    result = evidence.result
    if evidence.engine is None:
        hints = attempt("localising the error", lambda: diagnose_error(evidence))
        hints += attempt("the run's causes so far", lambda: raising_too(evidence))
        result.hints = fold(dedupe(sorted(hints, key=rank)), _failing_nodes(result))
        return notes
    case_hints = _forward_and_stale(evidence)
    for item in result.inputs:
        if not item.comparison.passed:
            item.hints = attempt(
                f"patterns of {item.name}", lambda i=item: _patterns(evidence, i.name)
            )
    rounding_only = all(
        item.comparison.passed or any(h.code == "precision" for h in item.hints)
        for item in result.inputs
    )
    if not rounding_only and result.forward is not None:
        faults = attempt("the run's causes so far", lambda: known_hints(evidence))
        if faults:
            notes.append(brief_note(evidence, faults))
        else:
            case_hints += attempt("localisation", lambda: _localise(evidence))
            if result.forward.passed:
                faults = attempt("fingerprints", lambda: case_fingerprints(evidence))
                if evidence.driver is None and not faults and evidence.own_driver:
                    # do the failing nodes explain it?
                    case_hints += attempt("the driver", lambda: _unexplained(evidence))
        case_hints += faults
        for item in result.inputs:
            if not item.comparison.passed:
                item.hints = sorted(faults + item.hints, key=rank)
    for item in result.inputs:
        case_hints += [h for h in item.hints if not h.code.startswith("fault:")][:1]
    # Rounding on one input does not explain another input's real failure.
    ranked = sorted(case_hints, key=rank if rounding_only else rank_beside_bug)
    result.hints = fold(dedupe(ranked), _failing_nodes(result))
    return notes


def _failing_nodes(result: CaseResult) -> int:
    return sum(1 for n in result.nodes if n.status in ("failed", "error"))


def _forward_and_stale(evidence: Evidence) -> list[Hint]:
    hints = []
    forward = evidence.result.forward
    if forward is not None and not forward.passed:
        hints.append(_forward_hint(evidence))
    stateful = stateful_hints(evidence) if evidence.stale and evidence.engine else []
    hints += stateful  # a rule that keeps state, named at its op: not the driver's
    if evidence.stale and not stateful:
        names = ", ".join(evidence.stale)
        hint = Hint(
            "stale-gradients",
            f"asking the engine twice for the gradient of {names} gave different answers",
            "reset accumulated gradients before each backward pass (`zero_grad()`, "
            "`x.grad = 0` for every value), or build a fresh graph per call",
            "exact",
        )
        located = stale_node(evidence) if evidence.engine is not None else None
        if located is not None:
            node, says, mechanism = located
            hint.message += f"; {says}"
            hint.node, hint.mechanism = node.text, mechanism
            hint.fix = FIXES["not-zeroed"] if mechanism else hint.fix
        hints.append(hint)
    return hints


def _forward_hint(evidence: Evidence) -> Hint:
    """A wrong forward value, unless it is the rounding of a lower-precision engine."""
    case, engine = evidence.case, evidence.engine
    assert engine is not None and evidence.result.forward is not None
    dtype = dtypes.judging_dtype(engine.dtype, case.dtype)
    rounding, worst = dtypes.within_rounding(evidence.reference.forward, engine.forward, dtype)
    if rounding and dtypes.lower_precision(engine.dtype, case.dtype):
        what, how = dtypes.cause(
            dtype, case.dtype, idiom.frameworks(evidence.engine_factory, engine)
        )
        return Hint(
            "precision",
            f"the forward value differs by {worst:.3g}, within {dtypes.ULPS} ulps of {dtype}: "
            f"{what}",
            how,
            "likely",
        )
    forward = evidence.result.forward
    differ = (
        f"max abs diff {forward.max_abs_diff:.3g}"
        if forward.max_abs_diff is not None
        else f"shape {fmt_shape(forward.engine_shape)} where the reference's is "
        f"{fmt_shape(forward.reference_shape)}"
    )
    return Hint(
        "forward-mismatch",
        f"the forward values already differ ({differ})",
        "fix the forward pass first: gradients of a wrong value cannot match; compare "
        "`value(node)` with the reference's op by op (the nodes checked alone say which)",
        "exact",
        node=case.expression.output.text,
    )


def _patterns(evidence: Evidence, name: str) -> list[Hint]:
    case, engine = evidence.case, evidence.engine
    assert engine is not None
    others = {n: g for n, g in evidence.reference.grads.items() if n != name}
    dtype = dtypes.judging_dtype(engine.dtype, case.dtype)
    cause = None
    if dtypes.lower_precision(engine.dtype, case.dtype):
        cause = dtypes.cause(dtype, case.dtype, idiom.frameworks(evidence.engine_factory, engine))
    subject = Subject(
        name,
        evidence.reference.grads[name],
        engine.grads[name],
        case.tolerance,
        dtype,
        others,
        frozenset(_reduced_sizes(case)),
        cause,
        others_got={n: g for n, g in engine.grads.items() if n != name},
    )
    return sorted((h for analysis in ANALYSES for h in analysis(subject)), key=rank)


def _reduced_sizes(case: Case) -> set[int]:
    return {
        reduced_size(node.args[0].shape, node.attrs.get("axis"))
        for node in case.expression.op_nodes
        if node.op is not None and node.op.name in ("mean", "sum")
    }


def _localise(evidence: Evidence) -> list[Hint]:
    """Every node checked alone: the failing nodes' mechanisms, or where every node
    passes, the driver's fault."""
    checks = check_nodes(
        evidence.case, evidence.engine_factory, evidence.builtin, evidence.rounding
    )
    evidence.result.nodes = [c.result for c in checks]
    failing = [c for c in checks if c.result.status == "failed"]
    evidence.node_faults = set()
    if failing:
        return [hint for check in failing for hint in node_hints(check, evidence)]
    every_node_passes = all(c.result.status == "passed" for c in checks)
    if every_node_passes and evidence.result.forward.passed and evidence.own_driver:
        evidence.driver = driver_hint(evidence)
        return [evidence.driver]
    return []


def _unexplained(evidence: Evidence) -> list[Hint]:
    """A driver hint when nodes fail alone but none of them explains where the gradients
    first go wrong (and no fingerprint explains the case)."""
    failing = {n.node: n.args for n in evidence.result.nodes if n.status in ("failed", "error")}
    return unexplained(evidence, failing) if failing else []


def node_hints(check: NodeCheck, evidence: Evidence) -> list[Hint]:
    """The hints of one node that fails alone: its forward, a kink, or a mechanism."""
    node, op = check.node, check.node.op
    assert op is not None
    if check.forward_failed:
        return [node_forward_hint(check)]
    hints, prober, spell = [], Prober(check, evidence.conventions), evidence.spelling
    if evidence.node_faults is not None:  # what the whole case's fingerprints may try
        evidence.node_faults |= {f.name for fs in prober.fingerprints.values() for f in fs}
    for arg in check.result.args:
        mask = kink_mask(node, arg, check.inputs)
        mismatched = check.mismatches.get(arg)
        at_kink = mask is not None and mismatched is not None and mismatched.any()
        if at_kink and not (mismatched & ~mask).any():
            observed = observe(check, evidence.conventions)
            hints.append(kink_hint(check, arg, observed, evidence.conventions, spell))
            continue
        hints.append(op_vjp_hint(check, arg, prober.find(arg), spell))
    return hints


def diagnose_run(run: RunResult, *, causes: bool = True) -> RunResult:
    """The run as a whole (SPEC §6.2), once its cases are checked: its root causes (each
    case's hints then lead with its own), unless not `causes`; and the report card."""
    if causes:
        run.root_causes = root_causes(run.cases)
        cite(run.cases, run.root_causes)
    run.ops = report_card(run.cases)
    return run


__all__ = ["FAULTS", "Evidence", "diagnose", "diagnose_run", "rank"]
