"""A rule whose answer changes between two identical backward passes (SPEC §6.1
`stateful`): each op node is built alone and asked for its gradients twice on the same
graph. A node whose second answer differs has a VJP that changed what it reads (the
node, the op, its input arrays: `self.axes = ...`, an in-place `b *= g`), named at its
op, never blamed on the driver. A second answer that is the first doubled is the
driver's instead: the leaves' gradients were not reset (`stale-gradients`,
`not-zeroed`, in `localisation.driver`).
"""

from __future__ import annotations

import numpy as np

from ...engines.driver import EngineFailure, EngineRun, Unsupported
from ...engines.reverse import run_engine
from ...results import Hint
from .. import idiom
from ..evidence import Evidence
from ..localisation.localise import NodeCheck, check_nodes, single_op


def stateful_hints(evidence: Evidence) -> list[Hint]:
    """An `op-vjp` / `stateful` hint for each argument of each node whose VJP, asked
    twice alone, answers differently the second time (but not by adding the first again)."""
    checks = check_nodes(
        evidence.case, evidence.engine_factory, evidence.builtin, evidence.rounding, run=False
    )
    hints = []
    for check in checks:
        twice = _asked_twice(check)
        if twice is None or twice.grads_again is None:
            continue
        again = twice.grads_again
        changed = [n for n in twice.grads if not check.same(twice.grads[n], again[n])]
        if changed and not all(check.same(2 * twice.grads[n], again[n]) for n in changed):
            hints += [_hint(check, twice, int(n[1:]), evidence.spelling) for n in changed]
    return hints


def _asked_twice(check: NodeCheck) -> EngineRun | None:
    expression, names = single_op(check.node)
    # Copies: a rule that writes into its inputs must not change the other nodes' checks.
    inputs = {name: np.array(value) for name, value in check.inputs.items()}
    try:
        return run_engine(
            check.engine_factory(), expression, inputs, names, check.cotangent, ask_twice=True
        )
    except (EngineFailure, Unsupported):
        return None


def _hint(check: NodeCheck, twice: EngineRun, arg: int, spell: str) -> Hint:
    node, op = check.node, check.node.op
    assert op is not None and twice.grads_again is not None
    name = f"a{arg}"
    diff = float(np.max(np.abs(twice.grads[name] - twice.grads_again[name]), initial=0.0))
    return Hint(
        "op-vjp",
        f"{node.text}: {op.name}'s VJP for argument {arg} ({node.args[arg].text}) keeps state: "
        f"checked alone and asked twice for the same gradient on the same graph, its second "
        f"answer differs from its first (by up to {diff:.3g}), so the rule changed something "
        "it reads (the node, the op or its input arrays)",
        "compute the VJP from the node's inputs and the cotangent alone, assigning nothing "
        "to the node or the op and writing into no input (`b * g`, not `b *= g`): "
        f"{op.name}'s VJP for {idiom.param(op, arg)} is {idiom.rule(op, arg, spell)}",
        "exact",
        op=op.name,
        node=node.text,
        arg=arg,
        mechanism="stateful",
    )
