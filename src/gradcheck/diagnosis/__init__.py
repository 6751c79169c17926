"""Diagnosis: say why a failing case's gradients differ from the reference (SPEC §6).

`diagnose` runs, in order: the value and shape patterns of each failing input,
localisation (every op node checked alone), and the fault fingerprints relevant to
what localisation found. The hints are ranked strongest first: an exact fingerprint,
then a localised node, then patterns, then guesses. A step that raises is dropped with
a note; diagnosis never turns a failure into a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..cases.model import Case
from ..comparison.compare import compare
from ..engines.builtin import BuiltinEngine
from ..engines.driver import EngineFailure, EngineRun, Unsupported, run_engine
from ..engines.protocol import EngineFactory
from ..ops.reductions import reduced_size
from ..results import CONFIDENCE_RANK, CaseResult, Hint
from .faults import FAULTS, Fault, FaultyEngine, relevant_faults
from .kinks import CONVENTIONS, kink_mask
from .localise import NodeCheck, check_nodes
from .patterns import ANALYSES, Subject

# Rank of each kind of hint: lower is stronger.
_FIRST = {"forward-mismatch": 0, "stale-gradients": 1, "precision": 2}
_LOCALISED = {"kink": 4, "op-vjp": 5, "backprop-driver": 5}
_PATTERN = 6


def rank(hint: Hint) -> tuple[int, int]:
    if hint.code.startswith("fault:"):
        kind = 3
    else:
        kind = _FIRST.get(hint.code, _LOCALISED.get(hint.code, _PATTERN))
    return kind, CONFIDENCE_RANK[hint.confidence]


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
    """Attach hints to `evidence.result`; return notes about steps that failed."""
    notes: list[str] = []

    def attempt(step: str, fn: Callable[[], list[Hint]]) -> list[Hint]:
        try:
            return fn()
        except Exception as e:  # a diagnosis bug must not hide the failure itself
            notes.append(f"diagnosis step {step!r} failed ({type(e).__name__}: {e})")
            return []

    result = evidence.result
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
        case_hints += attempt("localisation", lambda: _localise(evidence))
        if result.forward.passed:
            faults = attempt("fingerprints", lambda: _fingerprints(evidence))
            case_hints += faults
            for item in result.inputs:
                if not item.comparison.passed:
                    item.hints = sorted(faults + item.hints, key=rank)
    for item in result.inputs:
        case_hints += [h for h in item.hints if not h.code.startswith("fault:")][:1]
    # Rounding on one input does not explain another input's real failure.
    result.hints = _dedupe(sorted(case_hints, key=rank if rounding_only else _rank_beside_bug))
    return notes


def _rank_beside_bug(hint: Hint) -> tuple[int, int]:
    kind, confidence = rank(hint)
    return (_PATTERN if hint.code == "precision" else kind), confidence


def _dedupe(hints: list[Hint]) -> list[Hint]:
    seen, out = set(), []
    for hint in hints:
        key = (hint.code, hint.message)
        if key not in seen:
            seen.add(key)
            out.append(hint)
    return out


def _forward_and_stale(evidence: Evidence) -> list[Hint]:
    hints = []
    forward = evidence.result.forward
    if forward is not None and not forward.passed:
        hints.append(
            Hint(
                "forward-mismatch",
                f"the forward values already differ (max abs diff {forward.max_abs_diff})",
                "fix the forward pass first: gradients of a wrong value cannot match",
                "exact",
                node=evidence.case.expression.output.text,
            )
        )
    if evidence.stale:
        names = ", ".join(evidence.stale)
        hints.append(
            Hint(
                "stale-gradients",
                f"asking the engine twice for the gradient of {names} gave different answers",
                "reset accumulated gradients before each backward pass (zero_grad), "
                "or build a fresh graph per call",
                "exact",
            )
        )
    return hints


def _patterns(evidence: Evidence, name: str) -> list[Hint]:
    case = evidence.case
    others = {n: g for n, g in evidence.reference.grads.items() if n != name}
    subject = Subject(
        name,
        evidence.reference.grads[name],
        evidence.engine.grads[name],
        case.tolerance,
        case.dtype,
        others,
        frozenset(_reduced_sizes(case)),
    )
    return sorted((h for analysis in ANALYSES for h in analysis(subject)), key=rank)


def _reduced_sizes(case: Case) -> set[int]:
    return {
        reduced_size(node.args[0].shape, node.attrs.get("axis"))
        for node in case.expression.op_nodes
        if node.op is not None and node.op.name in ("mean", "sum")
    }


def _localise(evidence: Evidence) -> list[Hint]:
    checks = check_nodes(evidence.case, evidence.engine_factory)
    evidence.result.nodes = [c.result for c in checks]
    failing = [c for c in checks if c.result.status == "failed"]
    if failing:
        return [hint for check in failing for hint in _node_hints(check)]
    if all(c.result.status == "passed" for c in checks) and evidence.result.forward.passed:
        return [
            Hint(
                "backprop-driver",
                "every op node passes when checked alone, but the whole expression fails: "
                "the backward pass's traversal or accumulation is wrong, not a rule",
                "visit nodes in reverse topological order and add (not overwrite) the "
                "gradients of a value used more than once",
                "likely",
            )
        ]
    return []


def _node_hints(check: NodeCheck) -> list[Hint]:
    node, op = check.node, check.node.op
    assert op is not None
    if check.forward_failed:
        return [
            Hint(
                "forward-mismatch",
                f"{node.text}: {op.name}'s forward value is wrong when checked alone",
                f"fix {op.name}'s forward computation ({op.doc})",
                "exact",
                op=op.name,
                node=node.text,
            )
        ]
    hints = []
    for arg in check.result.args:
        mask = kink_mask(node, arg, check.inputs)
        mismatched = check.mismatches.get(arg)
        if (
            mask is not None
            and mismatched is not None
            and mismatched.any()
            and not (mismatched & ~mask).any()
        ):
            hints.append(
                Hint(
                    "kink",
                    f"{node.text}: {op.name}'s gradient for argument {arg} "
                    f"({node.args[arg].text}) differs only where it sits at its kink or a tie "
                    f"({int(mismatched.sum())} elements); {CONVENTIONS[op.name]}",
                    f"follow TensorFlow's convention: {CONVENTIONS[op.name]}",
                    "exact",
                    op=op.name,
                    node=node.text,
                    arg=arg,
                )
            )
            continue
        argument = node.args[arg].text
        hints.append(
            Hint(
                "op-vjp",
                f"{node.text}: {op.name}'s VJP for argument {arg} ({argument}) is wrong "
                "when the node is checked alone on its own inputs",
                f"fix the gradient of {op.signature} with respect to "
                f"{op.params[0] if op.variadic else op.params[arg]}",
                "likely",
                op=op.name,
                node=node.text,
                arg=arg,
            )
        )
    return hints


def _fingerprints(evidence: Evidence) -> list[Hint]:
    case = evidence.case
    failing_ops = {n.op for n in evidence.result.nodes if n.status == "failed"}
    used_ops = {n.op.name for n in case.expression.op_nodes if n.op is not None}
    candidates = relevant_faults(failing_ops or used_ops)
    correct = _grads(BuiltinEngine(), evidence)
    return [_fault_hint(f, case) for f in candidates if _reproduces(f, evidence, correct)]


def _grads(engine: BuiltinEngine, evidence: Evidence) -> dict[str, np.ndarray] | None:
    case = evidence.case
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
    faulty = _grads(FaultyEngine(fault), evidence)
    if faulty is None or not _matches(faulty, evidence.engine.grads, evidence):
        return False
    return correct is None or not _matches(faulty, correct, evidence)


def _fault_hint(fault: Fault, case: Case) -> Hint:
    op = fault.name.split(".")[0]
    nodes = [n.text for n in case.expression.op_nodes if n.op is not None and n.op.name == op]
    return Hint(
        fault.code,
        f"{fault.summary}; the builtin engine with this one fault reproduces the engine's numbers",
        fault.fix,
        "exact",
        op=op if op in fault.ops else None,
        node=nodes[0] if len(nodes) == 1 else None,
    )


__all__ = ["FAULTS", "Evidence", "diagnose", "rank"]
