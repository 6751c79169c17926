"""What gradcheck and its worker processes say to each other: plain dataclasses.

gradcheck sends `WorkerInit` once, then `RunCase`, `Diagnose` (`checking.Diagnose`, the
request as the runner makes it) and `Release`; a worker answers `WorkerInit` with
`Ready` (or `InitFailed`), `RunCase` with an `EngineOutcome` and `Diagnose` with
`Diagnosed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...cases.model import Case
from ...results import CaseResult


@dataclass(frozen=True)
class WorkerInit:
    """How a worker starts: the import path of the run, the ops files it loads first
    (``--ops``: user-defined ops), then the engine it loads (an ``--engine`` spec, a file
    given by its absolute path). `stamp` tells the files' versions apart (their mtimes
    and sizes): a worker is reused by a later run of the same process only for an equal
    `WorkerInit`."""

    engine: str
    imports: tuple[str, ...] = ()
    sys_path: tuple[str, ...] = ()
    stamp: tuple[tuple[int, int], ...] = ()
    # How errors name the engine, as the run was given it (`config.engine_named`).
    named: str = field(default="", compare=False)


@dataclass
class Ready:
    engine: str  # the engine's name, for reports
    conventions: dict[str, str] = field(default_factory=dict)  # what its adapter declares


@dataclass
class InitFailed:
    message: str


@dataclass
class RunCase:
    case: Case
    ask_twice: bool
    cwd: str  # the run's working directory, restored before the case
    checks: tuple[str, ...] = ("vjp",)  # what to run: gradients, JVPs, second order (`modes`)
    threads: int | None = None  # the engine's BLAS threads meanwhile (`runner.threads`)


@dataclass
class Diagnosed:
    result: CaseResult
    notes: list[str]


@dataclass
class Release:
    """The worker may forget the case it ran last (its arrays)."""
