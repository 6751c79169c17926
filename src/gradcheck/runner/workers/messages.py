"""What gradcheck and its worker processes say to each other: plain dataclasses, and
`worker_init`, the first message as a run makes it.

gradcheck sends `WorkerInit` once, then `RunCase`, `Diagnose` (`checking.Diagnose`, the
request as the runner makes it) and `Release`; a worker answers `WorkerInit` with
`Ready` (or `InitFailed`), `RunCase` with an `EngineOutcome` and `Diagnose` with
`Diagnosed`.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ...cases.model import Case
from ...engines.naming import engine_named
from ...results import CaseResult
from ...util.modules import local_imports


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


def worker_init(spec: str, imports: tuple[str, ...] = (), named: str = "") -> WorkerInit:
    """How to start a worker for the engine `spec` (which errors call `named`): files
    named by absolute paths (a later run may start elsewhere), and stamped with their
    versions."""
    named = named or engine_named(spec, "--engine")
    target, colon, name = spec.partition(":")
    files = [Path(f) for f in (target, *imports) if f.endswith(".py")]
    if target.endswith(".py") and Path(target).is_file():  # else the worker says so, as given
        spec = f"{Path(target).resolve()}{colon}{name}"
        # The engine's own modules too: a kept worker never runs an edited helper's old code.
        files += sorted(local_imports(Path(target).resolve()) - {Path(target).resolve()})
    stamps = []
    for file in files:
        with contextlib.suppress(OSError):
            info = file.stat()
            stamps.append((info.st_mtime_ns, info.st_size))
    imports = tuple(str(Path(i).resolve()) if i.endswith(".py") else i for i in imports)
    return WorkerInit(spec, imports, tuple(sys.path), tuple(stamps), named)


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
    timeout: float | None = None  # the parent's deadline: the engine is interrupted before


@dataclass
class Diagnosed:
    result: CaseResult
    notes: list[str]


@dataclass
class Release:
    """The worker may forget the case it ran last (its arrays)."""
