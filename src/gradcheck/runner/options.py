"""What a run is told (`RunOptions`: `config.Settings.run_options` makes them from the
settings), and where an engine runs unless told."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..util.limits import STALE_CHECK_LIMIT, THREADS, TIMEOUT
from .workers.pool import SUPPORTED as workers_supported

if TYPE_CHECKING:
    from ..engines.protocol import EngineFactory
    from ..references.cache import ReferenceCache

Isolation = Literal["process", "none"]


@dataclass(frozen=True)
class RunOptions:
    strict: bool = False  # an unsupported case fails instead of being skipped
    fail_fast: bool = False
    # False: compare only. True or "first": a case that a fingerprint found on an earlier
    # case reproduces is not probed again. "all": every failing case in full.
    diagnose: bool | Literal["first", "all"] = True
    cache: ReferenceCache | None = None  # references kept between runs
    require_cache: bool = False  # a reference missing from `cache` is an error, not computed
    # Keep the cases' durations beside `cache`, which `--shard` balances by; never in a
    # shard, so that every shard of a split reads the same ones.
    record_durations: bool = True
    stale_check_limit: int | None = STALE_CHECK_LIMIT  # input elements; None: every case
    reference: str = "tensorflow"  # tensorflow | numeric | both, where a case sets none
    isolate: Isolation = "none"  # where the engine runs: worker processes, or this one
    timeout: float = TIMEOUT  # seconds per case in a worker (a case's `timeout:` wins)
    modes: tuple[str, ...] = ("rev",)  # rev and/or fwd, where a case sets none
    order: int = 1  # 2: second order too, where a case sets no order
    # Where the engine was set ("--engine", "pyproject.toml", "default"; `config.Settings`),
    # for the report and for the engine's errors; None: not said.
    engine_origin: str | None = None
    # The threads of the engine's worker and TensorFlow while both run (`runner.threads`):
    # "auto", "off" or "REF:ENGINE".
    threads: str = THREADS
    config: str | None = None  # the config file the settings came from, for the report


DEFAULT_OPTIONS = RunOptions()


def default_isolation(engine: str | EngineFactory) -> Isolation:
    """Where an engine runs unless told: the builtin engine in this process, any other named
    engine (an ``--engine`` spec) in workers (on a POSIX system); an engine given as a
    Python object in this process, as it belongs to its caller."""
    if not isinstance(engine, str) or not workers_supported:
        return "none"
    return "none" if engine == "builtin" else "process"
