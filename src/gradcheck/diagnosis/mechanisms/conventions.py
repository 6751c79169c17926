"""Conventions at kinks and ties (SPEC §4, §6.1): name what the engine did, and let an
adapter's declared conventions explain a difference.

At a node whose VJP differs only at its kink or ties, each convention of the op
(ops/conventions.py) is run on the node alone, and the one that reproduces the engine
is what the engine does; the `kink` hint says it, what TensorFlow does instead, and
whether the engine's choice is a valid subgradient. An adapter that declares
``conventions = {"maximum": "split"}`` is compared with TensorFlow's answer corrected
by its conventions (TensorFlow's gradients plus what the convention changes in the
builtin engine's), so a difference they fully explain passes, with a `convention` note.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ...cases.model import Case, Tolerance
from ...comparison.compare import compare
from ...engines.builtin.engine import BuiltinEngine
from ...engines.driver import EngineFailure, EngineRun, Unsupported
from ...engines.protocol import EngineFactory
from ...engines.reverse import run_engine
from ...ops.conventions import CONVENTIONS, TENSORFLOW, Convention, check_declared
from ...results import Hint, InputResult
from .. import idiom
from ..localisation.localise import NodeCheck


def declared_conventions(factory: EngineFactory) -> dict[str, str]:
    """The conventions an engine's adapter declares (validated when it was loaded)."""
    declared = getattr(factory, "conventions", None)
    return check_declared(declared) if declared else {}


def follow_conventions(
    case: Case, reference: EngineRun, declared: Mapping[str, str]
) -> tuple[EngineRun, dict[str, list[Convention]]]:
    """TensorFlow's answer corrected by the declared conventions, and for each input the
    conventions that change its gradient in this case (none: `reference` as it is)."""
    used = {n.op.name for n in case.expression.op_nodes if n.op is not None}
    relevant = {op: name for op, name in declared.items() if op in used and name != TENSORFLOW[op]}
    if not relevant:
        return reference, {}
    args = (case.expression, case.inputs, list(reference.grads), case.cotangent)
    plain, followed = run_engine(BuiltinEngine(), *args), run_engine(BuiltinEngine(relevant), *args)
    grads, changed = dict(reference.grads), {}
    for name, want in reference.grads.items():
        before, after = (
            plain.grads[name].astype(np.float64),
            followed.grads[name].astype(np.float64),
        )
        same = (before == after) | (np.isnan(before) & np.isnan(after))
        if same.all():
            continue
        with np.errstate(all="ignore"):
            moved = want.astype(np.float64) + (after - before)
        # inf - inf: where the convention's own value is not finite, take it as it is
        moved = np.where(np.isfinite(moved) | ~np.isfinite(after), moved, after)
        grads[name] = np.where(same, want, moved)
        changed[name] = [CONVENTIONS[op][c] for op, c in relevant.items()]
    return replace(reference, grads=grads), changed  # a numeric reference's trust kept


def note_conventions(
    inputs: list[InputResult],
    tensorflow: EngineRun,
    got: EngineRun,
    followed: Mapping[str, list[Convention]],
    tolerance: Tolerance,
) -> None:
    """Give each input that passes only thanks to a declared convention its note."""
    for item in inputs:
        if not item.comparison.passed or item.name not in followed:
            continue
        if not compare(tensorflow.grads[item.name], got.grads[item.name], tolerance).passed:
            item.hints = [convention_note(item.name, followed[item.name])]


def convention_note(name: str, conventions: list[Convention]) -> Hint:
    """An input that passes because of the conventions its engine declares."""
    listed = "; ".join(
        f"{c.op} {c.does} (`{c.name}`; TensorFlow: `{TENSORFLOW[c.op]}`)" for c in conventions
    )
    return Hint(
        "convention",
        f"{name} passes under the engine's declared conventions: {listed}",
        "nothing to fix: the adapter declares these conventions knowingly "
        "(`conventions = {...}`); remove a declaration to be held to TensorFlow's",
        "exact",
    )


def observe(check: NodeCheck, declared: Mapping[str, str]) -> Convention | None:
    """The convention of the node's op that reproduces the engine on the node alone."""
    op = check.node.op
    assert op is not None
    # Both sides of a tie as inputs, so that a literal's share is seen too.
    literals = any(a.is_literal for a in check.node.args) and len(op.params) == 2
    try:
        got = check.run(check.engine_factory, check.cotangent, literals_as_inputs=literals)
    except (EngineFailure, Unsupported):
        return None
    for convention in CONVENTIONS.get(op.name, {}).values():
        follows = {**declared, op.name: convention.name}
        try:
            want = check.run(
                lambda f=follows: BuiltinEngine(f), check.cotangent, literals_as_inputs=literals
            )
        except EngineFailure:
            continue
        if all(check.same(want.grads[n], got.grads[n]) for n in got.grads):
            return convention
    return None


def kink_hint(
    check: NodeCheck,
    arg: int,
    observed: Convention | None,
    declared: Mapping[str, str],
    spell: str,
) -> Hint:
    node, op = check.node, check.node.op
    assert op is not None
    ours = CONVENTIONS[op.name][TENSORFLOW[op.name]]
    count = int(check.mismatches[arg].sum())
    where = (
        f"{node.text}: {op.name}'s gradient for argument {arg} ({node.args[arg].text}) differs "
        f"only where it sits at its kink or a tie ({count} elements)"
    )
    tensorflow = f"TensorFlow {ours.does} (`{ours.name}`)"
    rule = idiom.rule(op, arg, spell)
    param = idiom.param(op, arg)
    if observed is None:
        return Hint(
            "kink",
            f"{where}; the engine follows none of the named conventions "
            f"({', '.join(CONVENTIONS[op.name])}) there; {tensorflow}",
            f"take a subgradient there, as TensorFlow does: {op.name}'s VJP for {param} is {rule}",
            "likely",
            op=op.name,
            node=node.text,
            arg=arg,
            mechanism=f"{op.name}:other",
        )
    valid = (
        f"`{observed.name}` is a valid subgradient (its parts sum to the upstream gradient)"
        if observed.subgradient
        else f"`{observed.name}` is not a valid subgradient: its parts do not sum to the "
        "upstream gradient"
    )
    claimed = declared.get(op.name)
    claim = f" (the adapter declares `{claimed}`)" if claimed else ""
    message = (
        f"{where}: the engine {observed.does} (`{observed.name}`){claim}; {tensorflow}; {valid}"
    )
    follow = f"follow TensorFlow: {op.name}'s VJP for {param} is {rule}"
    if observed.subgradient:
        fix = (
            f"{follow}; or, if `{observed.name}` is your engine's choice, declare it in the "
            f'adapter: conventions = {{"{op.name}": "{observed.name}"}}'
        )
    else:
        fix = f"give the tie's gradient out so that its parts sum to g: {follow}"
    return Hint(
        "kink",
        message,
        fix,
        "exact",
        op=op.name,
        node=node.text,
        arg=arg,
        mechanism=observed.code,
    )
