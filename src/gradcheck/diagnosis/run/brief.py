"""`--diagnose=first`: a case that a cause found on an earlier case of the run explains is
not probed again.

Before the full diagnosis, the run's causes so far (`root_causes.known`) are tried:
each fingerprint, by running it on this case (it must reproduce every gradient); a
located driver mechanism, by locating this case's driver fault (one more engine call)
and checking alone the consumers of the node it names. What confirms is the case's
diagnosis, with only those nodes checked alone (the nodes of a fingerprint's ops: the
report card counts them); the mechanism probes and the other fingerprints are skipped.
"""

from __future__ import annotations

from collections.abc import Callable

from ...expression import Node
from ...results import Hint
from ..evidence import Evidence
from ..faults.fingerprints import fans_out, reproducing, used_ops
from ..faults.planted import FAULTS, relevant_faults
from ..localisation.driver import driver_hint
from ..localisation.localise import NodeCheck, check_nodes


def known_hints(evidence: Evidence) -> list[Hint]:
    """The run's causes so far that explain this case too (none unless `evidence.brief`)."""
    forward = evidence.result.forward
    if not (evidence.brief and evidence.known) or forward is None or not forward.passed:
        return []
    case = evidence.case
    relevant = {f.name for f in relevant_faults(used_ops(case))}
    names = [h.code.removeprefix("fault:") for h, _ in evidence.known]
    faults = [FAULTS[n] for n in names if n in relevant]
    own = evidence.own_driver  # a framework's driver is never the cause
    found = reproducing(
        [f for f in faults if f.driver is None or (own and fans_out(case))], evidence
    )
    if found:
        ops = {op for h in found for op in FAULTS[h.code.removeprefix("fault:")].ops}
        _check_alone(evidence, lambda node: node.op is not None and node.op.name in ops)
        return found
    located = {h.mechanism for h, _ in evidence.known if h.code == "backprop-driver"}
    if not located or not own:
        return []
    hint = driver_hint(evidence)
    if hint.mechanism not in located or hint.node is None:
        return []
    consumers = {
        n.text for n in case.expression.op_nodes if any(a.text == hint.node for a in n.args)
    }
    checks = _check_alone(evidence, lambda node: node.text in consumers)
    if any(c.result.status != "passed" for c in checks):
        return []  # a rule is wrong there too: the full diagnosis says which
    evidence.driver = hint
    return [hint]


def _check_alone(evidence: Evidence, only: Callable[[Node], bool]) -> list[NodeCheck]:
    checks = check_nodes(
        evidence.case, evidence.engine_factory, evidence.builtin, evidence.rounding, only
    )
    evidence.result.nodes = [c.result for c in checks]
    return checks


def brief_note(evidence: Evidence, found: list[Hint]) -> str:
    """What the case's message says of its brief diagnosis."""
    where = {(h.code, h.mechanism): origin for h, origin in evidence.known}
    said = "; ".join(
        f"{h.code}{f' [{h.mechanism}]' if h.mechanism else ''}, found on "
        f"{where.get((h.code, h.mechanism), 'an earlier case')}"
        for h in found
    )
    return (
        f"diagnosed in brief: the run's cause {said}, explains this case too "
        "(--diagnose=all probes every case in full)"
    )
