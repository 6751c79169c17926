"""The engine's report card (SPEC §6.2): per op, how the cases that use it fared.

Over a run, from the cases' results: a case that uses an op and passed counts as
`passed` for it; a failing case counts as `failed` for the ops found wrong there (a node
of the op failed when checked alone, or the case's best explanation names the op, with
the mechanism found), and as `failed_elsewhere` for the others; a case skipped for lack
of an op counts as `unsupported` for that op alone (the others were never tried).

Without running anything, `coverage` reads which ops an engine implements at all
(`gradcheck ops --engine`): a method per op, and not one that only raises
NotImplementedError (an `init-engine` stub).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...engines.protocol import is_functional
from ...ops import Op
from ...results import CaseResult, Hint, OpRecord

LOCALISED = ("op-vjp", "kink", "forward-mismatch")


def report_card(cases: Sequence[CaseResult]) -> dict[str, OpRecord]:
    """Every op the cases use, in the order they first appear, with its record."""
    card: dict[str, OpRecord] = {}
    for case in cases:
        used = list(dict.fromkeys(_op_of(node.op) for node in case.graph if node.op))
        for op in used:
            card.setdefault(op, OpRecord())
        if case.unsupported_ops:
            for op in case.unsupported_ops:
                card.setdefault(op, OpRecord()).unsupported += 1
        elif case.status == "passed":
            for op in used:
                card[op].passed += 1
        elif case.status in ("failed", "error"):
            found = found_wrong(case)
            for op in used:
                if op in found:
                    card[op].failed += 1
                    mechanisms = card[op].mechanisms
                    for mechanism in found[op]:  # one per wrong rule of the op found there
                        mechanisms[mechanism] = mechanisms.get(mechanism, 0) + 1
                else:
                    card[op].failed_elsewhere += 1
    return {op: record for op, record in card.items() if _counted(record)}


def _counted(record: OpRecord) -> bool:
    return bool(record.passed or record.failed or record.failed_elsewhere or record.unsupported)


def found_wrong(case: CaseResult) -> dict[str, list[str]]:
    """The ops found wrong in a failing case, each with what was found there (a mechanism,
    or the fingerprint that explains the case; one per wrong rule of the op), empty where
    nothing more was found."""
    top = case.hints[0] if case.hints else None
    hints = [*case.hints, *(top.also if top else [])]
    found: dict[str, list[str]] = {}
    for node in case.nodes:
        if node.status in ("failed", "error"):
            found.setdefault(_op_of(node.op), _mechanisms(node.op, hints, top))
    if top is not None and top.op:
        found.setdefault(_op_of(top.op), _mechanisms(top.op, hints, top))
    return found


def _op_of(label: str) -> str:
    """The op a graph node's label names: an output of an op with several (split[1]) is
    the op's (split), which the card counts once per case."""
    return label.split("[", 1)[0]


def _mechanisms(op: str, hints: list[Hint], top: Hint | None) -> list[str]:
    if top is not None and top.code.startswith("fault:"):
        return [top.code]  # the whole case is this fault; its nodes are what it touches
    found = {h.cause: h.mechanism or h.code for h in hints if h.op == op and h.code in LOCALISED}
    return list(dict.fromkeys(found.values()))


# -- without running anything ----------------------------------------------------------


@dataclass
class Coverage:
    """Which ops an engine implements; and the adapter methods (leaf, grad, ...) it lacks
    or has only as stubs."""

    implements: list[str]
    stubs: list[str]  # methods that only raise NotImplementedError
    lacks: list[str]
    protocol: list[str]


def coverage(engine: Any, ops: Sequence[Op]) -> Coverage:
    """`engine` (an instance) against the registry's `ops`."""
    implements, stubs, lacks = [], [], []
    for op in ops:
        method = getattr(engine, op.name, None)
        if not callable(method):
            lacks.append(op.name)
        elif _stub(method):
            stubs.append(op.name)
        else:
            implements.append(op.name)
    needed = ("vjp",) if is_functional(engine) else ("leaf", "value", "grad")
    protocol = [
        name
        for name in needed
        if not callable(method := getattr(engine, name, None)) or _stub(method)
    ]
    return Coverage(implements, stubs, lacks, protocol)


def _stub(method: Any) -> bool:
    """Whether a method's body is only a docstring and `raise NotImplementedError`."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError):
        return False  # no source to read (a builtin, a C extension): take it as implemented
    function = tree.body[0] if tree.body else None
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    body = [
        s
        for s in function.body
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    raised = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
