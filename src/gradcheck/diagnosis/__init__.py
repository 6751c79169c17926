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

from collections import Counter
from collections.abc import Callable

import numpy as np

from ..cases.model import LOW_PRECISION, Case
from ..comparison.compare import compare
from ..engines.builtin import BuiltinEngine
from ..engines.driver import EngineFailure, Unsupported, run_engine
from ..ops.broadcast import fmt_shape
from ..ops.reductions import reduced_size
from ..results import CaseResult, Hint, RunResult
from . import dtypes, idiom
from .conventions import kink_hint, observe
from .driver import FIXES, driver_hint, stale_node, unexplained
from .errors import diagnose_error, raising_too
from .evidence import Evidence
from .faults import FAULTS, Fault, FaultyEngine, fault_hint, relevant_faults
from .kinks import kink_mask
from .localise import NodeCheck, check_nodes
from .mechanisms import Prober, op_vjp_hint
from .patterns import ANALYSES, Subject
from .ranking import dedupe, fold, rank, rank_beside_bug
from .report_card import report_card
from .root_causes import cite, root_causes

Step = Callable[[], list[Hint]]


def diagnose(evidence: Evidence) -> list[str]:
    """Attach hints to `evidence.result`; return notes about steps that failed."""
    notes: list[str] = []

    def attempt(step: str, fn: Step) -> list[Hint]:
        try:
            return fn()
        except Exception as e:  # a diagnosis bug must not hide the failure itself
            notes.append(f"diagnosis step {step!r} failed ({type(e).__name__}: {e})")
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
        faults = attempt("the run's causes so far", lambda: _known(evidence))
        if faults:  # the nodes of their ops are still checked alone: the report card counts them
            notes.append(_brief(evidence, faults))
            ops = {op for h in faults for op in FAULTS[h.code.removeprefix("fault:")].ops}
            attempt("localisation", lambda: _localise(evidence, probe=False, ops=ops))
        else:
            case_hints += attempt("localisation", lambda: _localise(evidence))
            if result.forward.passed:
                faults = attempt("fingerprints", lambda: _fingerprints(evidence))
                if evidence.driver is None and not faults:  # do the failing nodes explain it?
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
    if evidence.stale:
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
        else f"shape {fmt_shape(forward.engine_shape)} where TensorFlow's is "
        f"{fmt_shape(forward.reference_shape)}"
    )
    return Hint(
        "forward-mismatch",
        f"the forward values already differ ({differ})",
        "fix the forward pass first: gradients of a wrong value cannot match; compare "
        "`value(node)` with TensorFlow's op by op (the nodes checked alone say which)",
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
    )
    return sorted((h for analysis in ANALYSES for h in analysis(subject)), key=rank)


def _reduced_sizes(case: Case) -> set[int]:
    return {
        reduced_size(node.args[0].shape, node.attrs.get("axis"))
        for node in case.expression.op_nodes
        if node.op is not None and node.op.name in ("mean", "sum")
    }


def _localise(evidence: Evidence, *, probe: bool = True, ops: set[str] | None = None) -> list[Hint]:
    """Every node checked alone (of `ops` only, if given); if `probe`, the failing nodes'
    mechanisms, or where every node passes, the driver's fault."""
    checks = check_nodes(
        evidence.case, evidence.engine_factory, evidence.builtin, evidence.rounding, ops
    )
    evidence.result.nodes = [c.result for c in checks]
    if not probe:
        return []
    failing = [c for c in checks if c.result.status == "failed"]
    evidence.node_faults = set()
    if failing:
        return [hint for check in failing for hint in node_hints(check, evidence)]
    if all(c.result.status == "passed" for c in checks) and evidence.result.forward.passed:
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
        return [
            Hint(
                "forward-mismatch",
                f"{node.text}: {op.name}'s forward value is wrong when checked alone",
                f"fix {op.name}'s forward computation ({op.doc}; TensorFlow: `{op.tf_name}`)",
                "exact",
                op=op.name,
                node=node.text,
            )
        ]
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


def _fingerprints(evidence: Evidence) -> list[Hint]:
    case = evidence.case
    failing_ops = {n.op for n in evidence.result.nodes if n.status == "failed"}
    candidates = [
        f for f in relevant_faults(failing_ops or _used_ops(case)) if _plausible(f, evidence)
    ]
    return _reproducing(candidates, evidence)


def _used_ops(case: Case) -> set[str]:
    return {n.op.name for n in case.expression.op_nodes if n.op is not None}


def _reproducing(faults: list[Fault], evidence: Evidence) -> list[Hint]:
    """The hints of the `faults` that reproduce the engine's numbers on the case."""
    case = evidence.case
    # What a fault must change something against: TensorFlow's answer, or in float16 and
    # bfloat16, where rounding alone tells engines apart, the builtin engine's own.
    low = case.dtype in LOW_PRECISION
    correct = _grads(evidence.builtin(), evidence) if low else evidence.reference.grads
    return [
        fault_hint(f, case, evidence.spelling) for f in faults if _reproduces(f, evidence, correct)
    ]


def _known(evidence: Evidence) -> list[Hint]:
    """`--diagnose=first`: the run's fingerprints so far that reproduce this case too."""
    assert evidence.result.forward is not None
    if not (evidence.brief and evidence.known) or not evidence.result.forward.passed:
        return []
    relevant = {f.name for f in relevant_faults(_used_ops(evidence.case))}
    names = [h.code.removeprefix("fault:") for h, _ in evidence.known]
    faults = [FAULTS[n] for n in names if n in relevant and n in FAULTS]
    return _reproducing(
        [f for f in faults if f.driver is None or _fans_out(evidence.case)], evidence
    )


def _brief(evidence: Evidence, found: list[Hint]) -> str:
    where = dict((h.code, origin) for h, origin in evidence.known)
    said = "; ".join(f"{h.code}, found on {where[h.code]}" for h in found)
    return (
        f"diagnosed in brief: the run's cause {said}, reproduces this case too "
        "(--diagnose=all probes every case in full)"
    )


def _plausible(fault: Fault, evidence: Evidence) -> bool:
    """Whether the whole case is worth running with `fault` (each run costs a backward
    pass): an op's fault only if it reproduced a node alone; a driver fault only where
    it can make a difference, or shows (`no-upstream` fails every node alone)."""
    nodes = evidence.result.nodes
    if fault.driver == "no-upstream":
        return bool(nodes) and all(n.status == "failed" for n in nodes)
    if fault.driver is not None:  # accumulation and order matter only at a fan-out ...
        found = evidence.driver  # ... and only where the intermediate gradients did not say
        return _fans_out(evidence.case) and (found is None or found.mechanism == "unknown")
    return evidence.node_faults is None or fault.name in evidence.node_faults


def _fans_out(case: Case) -> bool:
    uses = Counter(id(arg) for node in case.expression.op_nodes for arg in node.args)
    return any(count > 1 for count in uses.values())


def _grads(engine: BuiltinEngine, evidence: Evidence) -> dict[str, np.ndarray] | None:
    case = evidence.case
    assert evidence.engine is not None
    try:
        run = run_engine(
            engine, case.expression, case.inputs, list(evidence.engine.grads), case.cotangent
        )
    except (EngineFailure, Unsupported):
        return None  # the fault does not apply to these shapes, or to a user op without VJPs
    return run.grads


def _matches(a: dict[str, np.ndarray], b: dict[str, np.ndarray], evidence: Evidence) -> bool:
    return all(compare(a[name], b[name], evidence.case.tolerance).passed for name in a)


def _reproduces(fault: Fault, evidence: Evidence, correct: dict[str, np.ndarray] | None) -> bool:
    """The fault gives the engine's numbers, and on this case it changes something at all.

    A fault that changes nothing here (a batch-axes fault on 2-D inputs) would otherwise
    "reproduce" an engine whose only difference from the reference is rounding.
    """
    assert evidence.engine is not None
    faulty = _grads(FaultyEngine(fault, evidence.conventions), evidence)
    if faulty is None or not _matches(faulty, evidence.engine.grads, evidence):
        return False
    return correct is None or not _matches(faulty, correct, evidence)


def diagnose_run(run: RunResult, *, causes: bool = True) -> RunResult:
    """The run as a whole (SPEC §6.2), once its cases are checked: its root causes (each
    case's hints then lead with its own), unless not `causes`; and the report card."""
    if causes:
        run.root_causes = root_causes(run.cases)
        cite(run.cases, run.root_causes)
    run.ops = report_card(run.cases)
    return run


__all__ = ["FAULTS", "Evidence", "diagnose", "diagnose_run", "rank"]
