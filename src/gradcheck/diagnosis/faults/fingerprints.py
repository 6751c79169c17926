"""Fault fingerprints of a whole case: the catalogue faults relevant to what localisation
found, each run in the builtin engine; every one that reproduces the engine's numbers
(and changes something on the case at all) is a `fault:<name>` hint, `exact`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ...cases.dtypes import LOW_PRECISION
from ...cases.model import Case
from ...comparison.compare import compare
from ...engines.builtin.engine import BuiltinEngine
from ...engines.driver import EngineFailure, Unsupported
from ...engines.reverse import run_engine
from ...results import Hint
from ..evidence import Evidence
from .planted import Fault, FaultyEngine, fault_hint, relevant_faults


def case_fingerprints(evidence: Evidence) -> list[Hint]:
    """The fingerprints worth running on a failing case that reproduce it."""
    case = evidence.case
    failing_ops = {n.op for n in evidence.result.nodes if n.status == "failed"}
    candidates = [
        f for f in relevant_faults(failing_ops or used_ops(case)) if _plausible(f, evidence)
    ]
    return reproducing(candidates, evidence)


def used_ops(case: Case) -> set[str]:
    return {n.op.name for n in case.expression.op_nodes if n.op is not None}


def reproducing(faults: list[Fault], evidence: Evidence) -> list[Hint]:
    """The hints of the `faults` that reproduce the engine's numbers on the case."""
    case = evidence.case
    # What a fault must change something against: TensorFlow's answer, or in float16 and
    # bfloat16, where rounding alone tells engines apart, the builtin engine's own.
    low = case.dtype in LOW_PRECISION
    correct = _grads(evidence.builtin(), evidence) if low else evidence.reference.grads
    return [
        fault_hint(f, case, evidence.spelling) for f in faults if _reproduces(f, evidence, correct)
    ]


def _plausible(fault: Fault, evidence: Evidence) -> bool:
    """Whether the whole case is worth running with `fault` (each run costs a backward
    pass): an op's fault only if it reproduced a node alone; a driver fault only where
    it can make a difference, or shows (`no-upstream` fails every node alone)."""
    nodes = evidence.result.nodes
    if fault.driver is not None and not evidence.own_driver:
        return False  # a framework's driver is not the suspect: its op rules are
    if fault.driver == "no-upstream":
        return bool(nodes) and all(n.status == "failed" for n in nodes)
    if fault.driver is not None:  # accumulation and order matter only at a fan-out ...
        found = evidence.driver  # ... and only where the intermediate gradients did not say
        return fans_out(evidence.case) and (found is None or found.mechanism == "unknown")
    return evidence.node_faults is None or fault.name in evidence.node_faults


def fans_out(case: Case) -> bool:
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
