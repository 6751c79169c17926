"""When the engine raises while differentiating: which node, which argument, and which
known fault fails that way (SPEC §6.1, issue: errors get a diagnosis too).

Every op node is checked alone; a node whose VJP raises alone is asked for each of its
arguments' gradients on its own, to name the argument. The catalogue faults of its op
are run on the node too: one that raises there as the engine does is the likely cause,
and if, on probe inputs whose axes all have one size (where the fault no longer raises:
a full transpose of a cube is a cube), it reproduces the engine's VJP, the fault is it.
Where no fault does, the op is probed alone for the inputs that make it raise
(`raising.py`: "only when axis=None"). Nodes that all raise are the driver's only when
they are of different ops and nothing per-op explains them. A case that ran out of time
checks each node within a share of its timeout: a node still running `hangs`. A
fingerprint found on an earlier case of the run that raises on this case too is its
likely cause (`raising_too`).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np

from ...engines.driver import EngineFailure, Unsupported
from ...engines.reverse import run_engine
from ...ops import ShapeError
from ...results import Hint
from ...util.deadline import TimedOut, interrupted_after, is_timed_out
from ...util.limits import TIMEOUT
from .. import idiom
from ..evidence import Evidence
from ..faults.planted import Fault, FaultyEngine, fault_hint, relevant_faults
from ..localisation.localise import NodeCheck, check_node, check_nodes
from .raising import NODE_LIMIT, Raising, dtypes, hangs_hint, raising_inputs

PROBE_SIZE = 3  # every axis of the probe inputs


def diagnose_error(evidence: Evidence) -> list[Hint]:
    checks, limit = _checked(evidence)
    evidence.result.nodes = [c.result for c in checks]
    raising = [c for c in checks if c.result.status == "error"]
    if not raising:
        if checks and all(c.result.status == "passed" for c in checks):
            return _driver_hints(evidence, "every op node passes when checked alone")
        return []
    hints: list[Hint] = []
    spell = evidence.spelling
    explained = False  # by one op's rule: a fault of its, or a condition on its inputs
    for check in raising:
        args = _raising_args(check, limit)
        check.result.args = args
        if limit is not None and isinstance(check.failure.__cause__, TimedOut):
            hints += [hangs_hint(check, arg, limit, spell) for arg in args]
            continue
        matching = [
            f for f in _raising_faults(check, evidence) if _reproduced_on_probe(check, f, evidence)
        ]
        # A fault that reproduces the rule says when it raises; else the probes find it.
        why = raising_inputs(check, probe=not matching)
        explained |= bool(matching) or why.specific
        for arg in args:
            hints.append(_node_hint(check, arg, why, matching[0] if matching else None, spell))
        hints += [
            _case_fault_hint(f, check, evidence, spell)
            for f in matching
            if _raises_on_case(f, evidence)
        ]
    ops = {c.node.op.name for c in raising if c.node.op is not None}
    # Nodes of different ops all raising, whatever their inputs: the driver they share.
    if len(raising) == len(checks) > 1 and len(ops) > 1 and not explained:
        return _driver_hints(evidence, "it raises on every op node checked alone, whatever its op")
    return hints


def _checked(evidence: Evidence) -> tuple[list[NodeCheck], float | None]:
    """Every op node checked alone; when the case ran out of time, each within a share of
    the case's timeout (the diagnosis has it again), which is returned. A node then runs at
    most three times: checked, then a hanging one for each of (mostly) two arguments."""
    hung = evidence.failure is not None and is_timed_out(evidence.failure.message)
    checks = check_nodes(
        evidence.case, evidence.engine_factory, evidence.builtin, evidence.rounding, run=not hung
    )
    if not hung:
        return checks, None
    limit = min(NODE_LIMIT, (evidence.timeout or TIMEOUT) / (3 * max(1, len(checks))))
    for check in checks:
        # TimedOut out of the engine is its failure; out of the right answer, the node
        # stays unjudged.
        with contextlib.suppress(TimedOut), interrupted_after(limit):
            check_node(check)
    return checks, limit


def _raising_args(check: NodeCheck, limit: float | None) -> list[int]:
    """The arguments whose gradient alone makes the engine raise (all, if none alone does);
    each within `limit` seconds, when the case ran out of time."""
    raising = []
    for name in check.names:
        try:
            with interrupted_after(limit):
                check.run(check.engine_factory, check.cotangent, wrt=[name])
        except (EngineFailure, Unsupported, TimedOut):
            raising.append(int(name[1:]))
    return raising or [int(n[1:]) for n in check.names]


def _raising_faults(check: NodeCheck, evidence: Evidence) -> list[Fault]:
    """The catalogue faults of the node's op that raise on the node alone, as the engine does."""
    op = check.node.op
    assert op is not None
    found = []
    for fault in relevant_faults({op.name}, driver=False):
        try:
            check.run(lambda f=fault: FaultyEngine(f, evidence.conventions), check.cotangent)
        except EngineFailure:
            found.append(fault)
    return found


def _probe_inputs(
    check: NodeCheck, dtype: np.dtype
) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """Inputs of the node's ranks with every axis PROBE_SIZE long, and a cotangent; None
    when the op's shape rule refuses them (a reshape to a fixed shape, a slice)."""
    op = check.node.op
    assert op is not None and not op.variadic
    shapes = [
        (PROBE_SIZE,) * len(check.inputs[f"a{i}"].shape) if f"a{i}" in check.inputs else ()
        for i in range(len(check.node.args))
    ]
    try:
        out = op.shape(*shapes, **check.node.attrs)
    except ShapeError:
        return None
    rng = np.random.default_rng([PROBE_SIZE, len(check.node.text)])
    inputs = {
        name: rng.uniform(0.5, 1.5, shapes[int(name[1:])]).astype(dtype) for name in check.inputs
    }
    return inputs, rng.standard_normal(out).astype(dtype)


def _reproduced_on_probe(check: NodeCheck, fault: Fault, evidence: Evidence) -> bool:
    """Whether `fault` gives the engine's VJP on the cube probe, in the first dtype the
    engine does not raise in."""
    if check.node.op is None or check.node.op.variadic:
        return False
    for dtype in dtypes(check):
        probe = _probe_inputs(check, dtype)
        if probe is None:
            return False
        inputs, cotangent = probe
        try:
            got = check.run(check.engine_factory, cotangent, inputs)
        except (EngineFailure, Unsupported):
            continue
        try:
            faulty = check.run(lambda: FaultyEngine(fault, evidence.conventions), cotangent, inputs)
            right = check.right(cotangent, inputs)
        except (EngineFailure, Unsupported):
            return False
        # In another dtype than the case's, its rounding is no difference.
        judge = check if dtype == check.cotangent.dtype else replace(check, rounding=dtype.name)
        return all(judge.same(faulty.grads[n], got.grads[n]) for n in got.grads) and not all(
            judge.same(faulty.grads[n], right.grads[n]) for n in got.grads
        )
    return False


def _short(message: str, limit: int = 160) -> str:
    """An engine's error message on one line, cut where it would swamp the hint."""
    line = " ".join(message.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _raises_on_case(fault: Fault, evidence: Evidence) -> bool:
    case = evidence.case
    try:
        run_engine(
            FaultyEngine(fault, evidence.conventions),
            case.expression,
            case.inputs,
            case.wrt,
            case.cotangent,
        )
    except EngineFailure:
        return True
    return False


def raising_too(evidence: Evidence) -> list[Hint]:
    """The run's fingerprints so far that raise on this case too, as the engine does."""
    ops = {n.op.name for n in evidence.case.expression.op_nodes if n.op is not None}
    relevant = {f.name: f for f in relevant_faults(ops)}
    hints = []
    for hint, origin in evidence.known:
        fault = relevant.get(hint.code.removeprefix("fault:"))
        if fault is not None and _raises_on_case(fault, evidence):
            found = fault_hint(
                fault,
                evidence.case,
                evidence.spelling,
                f"{fault.summary}; the builtin engine with this one fault, found on {origin}, "
                "raises on this case too",
            )
            found.confidence = "likely"
            hints.append(found)
    return hints


def _node_hint(check: NodeCheck, arg: int, why: Raising, fault: Fault | None, spell: str) -> Hint:
    node, op = check.node, check.node.op
    assert op is not None and check.failure is not None
    says = (
        f"{node.text}: {why.says(op.name)}; checked alone, its VJP for argument {arg} "
        f"({node.args[arg].text}) raises ({_short(check.failure.message)})"
    )
    rule = f"{op.name}'s VJP for {idiom.param(op, arg)} is {idiom.rule(op, arg, spell)}"
    if fault is None:
        return Hint(
            "op-vjp",
            says,
            f"compute the rule for these shapes: {rule}"
            if why.dtype is None
            else f"keep the gradients in the inputs' dtype ({why.dtype}): nothing on the way "
            "may start from a float32 value (a Python `0.0` that TensorFlow turns into "
            f"float32, an `np.float32` array); {rule}",
            "exact" if why.separated else "likely",
            op=op.name,
            node=node.text,
            arg=arg,
            mechanism="raises",
            region=why.region,
        )
    return Hint(
        "op-vjp",
        f"{says}; the catalogue's {fault.name} raises there too, and on inputs of the same "
        f"ranks with every axis {PROBE_SIZE} long, where it does not raise, it reproduces the "
        f"engine's VJP: {fault.summary}",
        f"{fault.fix}; {rule}",
        "exact",
        op=op.name,
        node=node.text,
        arg=arg,
        mechanism=fault.code,
        region=why.region,
    )


def _case_fault_hint(fault: Fault, check: NodeCheck, evidence: Evidence, spell: str) -> Hint:
    hint = fault_hint(
        fault,
        evidence.case,
        spell,
        f"{fault.summary}; the builtin engine with this one fault raises on this case too, and "
        f"reproduces the engine's VJP of {check.node.text} where it does not raise",
    )
    hint.confidence = "likely"
    return hint


def _driver_hints(evidence: Evidence, why: str) -> list[Hint]:
    """No driver hint for a framework's backward pass (SPEC §6.1: the top line is the truth)."""
    return [_driver_hint(evidence, why)] if evidence.own_driver else []


def _driver_hint(evidence: Evidence, why: str) -> Hint:
    failure = evidence.failure
    error = failure.message if failure is not None else "an error"
    return Hint(
        "backprop-driver",
        f"the backward pass raises ({error}), and {why}: the driver (`grad`, its traversal, "
        "its accumulation, the shapes it hands on) raises, not one op's rule",
        "walk the nodes in reverse topological order, give each VJP its node's own gradient "
        "and add shares of the argument's shape (`grad[x] = grad[x] + unbroadcast(share, x)`)",
        "likely",
        mechanism="unknown",
    )
