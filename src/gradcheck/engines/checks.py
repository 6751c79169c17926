"""One check of an engine on a case: its gradients (``vjp``, reverse mode), its JVPs
(``jvp``, forward mode) or the gradient of ``sum(grad * v)`` (``hvp``, second order)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..cases.model import Case
from .driver import EngineRun
from .forward import run_jvp
from .reverse import run_engine
from .second_order import run_hvp


def run_check(engine: Any, case: Case, check: str, *, ask_twice: bool = False) -> EngineRun:
    """`case` through `engine` for `check` (``vjp``, ``jvp`` or ``hvp``)."""
    expression, inputs, wrt = case.expression, case.inputs, case.wrt
    if check == "jvp":
        return run_jvp(engine, expression, inputs, wrt, case.tangents())
    if check == "hvp":
        return run_hvp(engine, expression, inputs, wrt, case.cotangent, case.directions())
    return run_engine(engine, expression, inputs, wrt, case.cotangent, ask_twice=ask_twice)


def with_modes(reference: EngineRun | None, runs: dict[str, EngineRun]) -> EngineRun:
    """The reference of a case: reverse mode's run (or, without one, the forward value of
    another) carrying the other checks' runs (`EngineRun.jvp`, `EngineRun.hvp`)."""
    if reference is not None:
        return replace(reference, jvp=runs.get("jvp"), hvp=runs.get("hvp"))
    first = next(iter(runs.values()))
    return EngineRun(first.forward, {}, jvp=runs.get("jvp"), hvp=runs.get("hvp"))
