"""A traced check's hints, told in the user's code: each node a hint names is pointed at
the line that made it, a custom Function's at its backward, and a cut (``.detach()``,
``torch.no_grad()``, ``stop_gradient``) is said to be one, with what to do about it."""

from __future__ import annotations

from ..results import CaseResult, Hint
from .opaque import STOP_FIXES, STOP_LABELS
from .program import Binding, Program


def explain(result: CaseResult, program: Program) -> None:
    """Point every hint of `result` that names a node at the user's code (in place)."""
    seen: set[int] = set()
    for hint in _every_hint(result):
        if id(hint) not in seen:
            seen.add(id(hint))
            _point(hint, program)


def _every_hint(result: CaseResult):
    for hint in result.hints:
        yield hint
        yield from hint.also
    for _, check in result.labelled_inputs():
        for hint in check.hints:
            yield hint
            yield from hint.also


def _point(hint: Hint, program: Program) -> None:
    binding = program.where_of(hint.node) if hint.node else None
    if hint.op in STOP_LABELS:
        _cut(hint, binding, hint.op)
        return
    opaque = program.opaque.get(hint.op or "")
    where = binding.where if binding is not None else None
    if opaque is not None and opaque.kind == "function" and opaque.where is not None:
        applied = f", applied at {where}" if where else ""
        hint.message += f" (`{opaque.where.function}` is at {opaque.where}{applied})"
    elif opaque is not None and opaque.kind == "framework":
        hint.message += (
            f" ({opaque.label}{f' at {where}' if where else ''}, which no gradcheck op says: "
            "checked by finite differences of the framework's forward)"
        )
    elif where is not None:
        hint.message += f" (made at {where.quoted()})"


def _cut(hint: Hint, binding: Binding | None, stop: str) -> None:
    where = binding.where if binding is not None else None
    at = f" at {where.quoted()}" if where else ""
    hint.message = (
        f"{STOP_LABELS[stop]}{at} cuts the gradient: the function's value depends on what "
        "it cuts, so its derivative flows there, and the cut drops it (checked alone, the "
        "cut's VJP is zero where the identity's is g)"
    )
    hint.fix = (
        f"{STOP_FIXES[stop]}; if the cut is meant (a stop-gradient, a frozen target), the "
        "function's gradient is not the derivative of its value and no numeric check can "
        "confirm it: check the function without it"
    )
