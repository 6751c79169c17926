"""The engine step: the engine builds the expression and gives its forward value and
gradients, and the JVPs and second order the case asks for (`modes`). It runs where the
engine runs: in a worker process, or in gradcheck's own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..cases.model import Case
from ..engines.checks import run_check
from ..engines.driver import (
    EngineFailure,
    EngineRun,
    Unsupported,
    call_engine,
    describe,
    traceback_tail,
)
from ..engines.protocol import EngineFactory


@dataclass
class EngineOutcome:
    """What the engine step gave: its run, or why there is none (unsupported, an error,
    with `what` the engine call that raised)."""

    run: EngineRun | None = None
    unsupported: str | None = None
    unsupported_ops: list[str] = field(default_factory=list)  # the ops it lacks
    error: str | None = None
    traceback: str | None = None
    what: str | None = None
    # The checks beyond reverse mode the case asks for (``jvp``, ``hvp``), each its own.
    checks: dict[str, EngineOutcome] = field(default_factory=dict)

    @property
    def failure(self) -> EngineFailure | None:
        """The error as the diagnosis takes it, when there was one."""
        if self.error is None:
            return None
        return EngineFailure(self.error, self.traceback, self.what)


def engine_step(
    case: Case, factory: EngineFactory, *, ask_twice: bool, checks: Sequence[str] = ("vjp",)
) -> EngineOutcome:
    """`case` through a fresh engine from `factory` for each of `checks` (``vjp``, the
    gradients; ``jvp`` and ``hvp``, `modes`'s, into `EngineOutcome.checks`, unless the
    gradients failed); never raises for the engine."""
    outcome = _step(case, factory, "vjp", ask_twice) if "vjp" in checks else EngineOutcome()
    if "vjp" not in checks or outcome.run is not None:
        outcome.checks = {c: _step(case, factory, c, False) for c in checks if c != "vjp"}
    return outcome


def _step(case: Case, factory: EngineFactory, check: str, ask_twice: bool) -> EngineOutcome:
    try:
        engine = call_engine("creating the engine", factory)
        got = run_check(engine, case, check, ask_twice=ask_twice)
    except Unsupported as unsupported:
        return EngineOutcome(unsupported=str(unsupported), unsupported_ops=unsupported.ops)
    except EngineFailure as failure:
        return EngineOutcome(
            error=failure.message, traceback=failure.traceback_tail, what=failure.what
        )
    except Exception as e:  # what the driver's checks did not foresee is still the engine's
        return EngineOutcome(error=f"the engine raised {describe(e)}", traceback=traceback_tail(e))
    return EngineOutcome(got)
