"""What a mechanism probe found (`Finding`), and the localised hint that says it.

A hint's code is the check's (`op-vjp`, `op-jvp` in forward mode, `op-hvp` at second
order, SPEC §6.1 and its extension); its fix ends with the op's right rule, from the
op's declaration, in the engine's spelling.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ops.broadcast import fmt_shape
from ...results import Confidence, Hint
from .. import idiom
from ..faults.catalogue import BINARY_ELEMENTWISE
from ..localisation.localise import NodeCheck


@dataclass
class Finding:
    """A mechanism, and the words that go with it."""

    mechanism: str
    says: str  # completes "<op>'s VJP for argument <i> (<x>) ..."
    fix: str  # how to mend it, before the correct rule is given
    confidence: Confidence = "exact"
    region: str | None = None
    factor: float | None = None
    axes: list[int] | None = None
    got_rule: str | None = None  # `formula`: the rule the engine was seen to compute ...
    want_rule: str | None = None  # ... beside the op's right one


def op_vjp_hint(check: NodeCheck, arg: int, finding: Finding, spell: str) -> Hint:
    """The `op-vjp` hint of a failing node's argument (`op-jvp` for a JVP check, `op-hvp`
    at second order: the code is the check's)."""
    node, op = check.node, check.node.op
    assert op is not None
    param = idiom.param(op, arg)
    mode = "fwd" if check.check == "jvp" else "rev"
    rule = idiom.rule(op, arg, spell, mode) if op.rule(arg, mode=mode) else None
    fix = finding.fix + (f"; {op.name}'s {mode_rule(mode)} for {param} is {rule}" if rule else "")
    shape = node.args[arg].shape
    if rule and check.check == "vjp" and op.name in BINARY_ELEMENTWISE and shape != node.shape:
        fix += f", summed back to {param}'s shape {fmt_shape(shape)} (unbroadcast)"
    # One output of an op with several (split[1]): its rule given that output's direction.
    whose = op.name if node.part is None else f"{op.name}[{node.part}]"
    return Hint(
        f"op-{check.check}",
        f"{node.text}: {whose}'s {check.words.rule} for argument {arg} "
        f"({node.args[arg].name or node.args[arg].text}) {finding.says}",
        fix,
        finding.confidence,
        op=op.name,
        node=node.text,
        arg=arg,
        mechanism=finding.mechanism,
        region=finding.region,
        factor=finding.factor,
        axes=finding.axes,
        got_rule=finding.got_rule,
        want_rule=finding.want_rule,
    )


def mode_rule(mode: str) -> str:
    return "JVP" if mode == "fwd" else "VJP"


def node_forward_hint(check: NodeCheck) -> Hint:
    """The hint of a node whose forward value is already wrong alone."""
    node, op = check.node, check.node.op
    assert op is not None
    return Hint(
        "forward-mismatch",
        f"{node.text}: {op.name}'s forward value is wrong when checked alone",
        f"fix {op.name}'s forward computation ({op.doc}; TensorFlow: `{op.tf_name}`)",
        "exact",
        op=op.name,
        node=node.text,
    )
