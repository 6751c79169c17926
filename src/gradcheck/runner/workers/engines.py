"""Where a run's engine runs, behind the one interface the runner drives.

`InProcess` (``--isolate=none``): in gradcheck's own process, on the calling thread.
What the engine prints through Python's `sys.stdout` and `sys.stderr` is captured
(`breakpoint()` gives the debugger the terminal back), and the working directory is put
back after each step. There is no timeout: a case takes as long as it takes, which is
what a debugger needs.

`Isolated` (``--isolate=process``): in a `WorkerPool`, with a deadline per step, a fresh
worker after a crash and everything the worker process writes captured. A worker's
replies are read against the protocol's schema (`runner.workers.replies`) before
anything here uses them.

Both give the runner `(EngineOutcome, captured output)` for a case's engine step and
`(notes, captured output)` for its diagnosis; an `Isolated` step may raise `WorkerLost`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...cases.model import SEND_DRAWN_ELEMENTS, Case
from ...checking.diagnosis_step import Diagnose, adopt_diagnosis, diagnosis_step
from ...checking.engine_step import EngineOutcome, engine_step
from ...diagnosis.mechanisms.conventions import declared_conventions
from ...engines.loading import engine_name
from ...engines.protocol import EngineFactory
from .capture import Capture, captured_output
from .messages import Diagnosed, Release, RunCase, WorkerInit
from .pool import WorkerLost, WorkerPool

RELEASE_NOW_ELEMENTS = 1_000_000


@dataclass
class Ticket:
    """One case's engine work, from `start` to `release`."""

    case: Case
    ask_twice: bool
    timeout: float
    checks: tuple[str, ...] = ("vjp",)  # `checking.modes.checks`: the gradients, JVPs, second order
    outcome: EngineOutcome | None = None
    worker: Any = None


class InProcess:
    """The engine in this process, one step at a time when the runner asks for it."""

    def __init__(self, factory: EngineFactory) -> None:
        self.factory = factory
        self.engine: str | None = engine_name(factory)
        self.conventions = declared_conventions(factory)
        self.cwd = os.getcwd()

    def warm(self) -> None:
        pass

    def start(
        self,
        case: Case,
        ask_twice: bool,
        timeout: float,
        checks: Sequence[str] = ("vjp",),
        threads: int | None = None,
    ) -> Ticket:
        """`threads` is for a worker: nothing overlaps here, so nothing is limited."""
        return Ticket(case, ask_twice, timeout, tuple(checks))

    def outcome(self, ticket: Ticket) -> tuple[EngineOutcome, str]:
        with self._step() as output:
            ticket.outcome = engine_step(
                ticket.case, self.factory, ask_twice=ticket.ask_twice, checks=ticket.checks
            )
        return ticket.outcome, output.take()

    def diagnose(self, ticket: Ticket, request: Diagnose) -> tuple[list[str], str]:
        outcome = ticket.outcome
        assert outcome is not None
        with self._step() as output:
            notes = diagnosis_step(ticket.case, outcome, self.factory, request)
        return notes, output.take()

    def release(self, ticket: Ticket) -> None:
        ticket.outcome = None

    def close(self) -> None:
        pass

    @contextlib.contextmanager
    def _step(self) -> Iterator[Capture]:
        with captured_output() as output:
            try:
                yield output
            finally:
                with contextlib.suppress(OSError):
                    os.chdir(self.cwd)


class Isolated:
    """The engine in a worker process, the engine step starting as the case is started."""

    def __init__(self, init: WorkerInit, timeout: float) -> None:
        self.pool = WorkerPool(init, timeout=timeout)

    @property
    def engine(self) -> str | None:
        return self.pool.engine

    @property
    def conventions(self) -> dict[str, str]:
        """What the engine's adapter declares, as its worker read it (SPEC §4)."""
        return self.pool.conventions

    def warm(self) -> None:
        self.pool.start()

    def start(
        self,
        case: Case,
        ask_twice: bool,
        timeout: float,
        checks: Sequence[str] = ("vjp",),
        threads: int | None = None,
    ) -> Ticket:
        """`threads`: the engine's BLAS threads for this engine step (None: its own)."""
        ticket = Ticket(case, ask_twice, timeout, tuple(checks))
        if case.elements < SEND_DRAWN_ELEMENTS:
            case.inputs  # noqa: B018  (drawn here, for the reference, and sent as they are)
        message = RunCase(case, ask_twice, os.getcwd(), ticket.checks, threads, timeout)
        ticket.worker = self.pool.submit(message, timeout)
        return ticket

    def outcome(self, ticket: Ticket) -> tuple[EngineOutcome, str]:
        reply, output = self.pool.wait(ticket.worker)
        if not _is_outcome(reply, ticket.case):
            raise WorkerLost("the engine process sent a reply that is not an engine run", output)
        ticket.outcome = reply
        return reply, output

    def diagnose(self, ticket: Ticket, request: Diagnose) -> tuple[list[str], str]:
        message = dataclasses.replace(request, cwd=os.getcwd())
        worker = self.pool.resubmit(ticket.worker, message, ticket.timeout)
        reply, output = self.pool.wait(worker)
        if not isinstance(reply, Diagnosed):
            return ["diagnosis stopped: the engine process sent an unreadable reply"], output
        adopt_diagnosis(request.result, reply.result)
        return list(reply.notes), output

    def release(self, ticket: Ticket) -> None:
        # A large case's arrays are let go of at once; a small one's when the next comes.
        if ticket.worker is not None and ticket.case.elements >= RELEASE_NOW_ELEMENTS:
            self.pool.release(ticket.worker, Release())

    def close(self) -> None:
        self.pool.close()


# -- what a worker may reply -----------------------------------------------------------
# Its types are the messages' own (`replies` reads them against their schema); what is
# left to check is that an outcome is of the case that was sent.


def _is_outcome(reply: Any, case: Case, extra: bool = True) -> bool:
    """An `EngineOutcome` of `case`'s wrt names; its `checks` (`extra`) those of `jvp`, `hvp`."""
    if not isinstance(reply, EngineOutcome) or (reply.checks and not extra):
        return False
    checks = reply.checks.items()
    if not all(k in ("jvp", "hvp") and _is_outcome(v, case, False) for k, v in checks):
        return False
    run, wrt = reply.run, set(case.wrt)
    return run is None or (run.grads.keys() <= wrt and (run.grads_again or {}).keys() <= wrt)
