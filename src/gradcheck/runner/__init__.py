"""The pipeline a run's cases flow through: reference and engine side by side, then the
verdict (here, always) and the diagnosis (where the engine runs).

`run` checks a list of cases and overlaps the work: TensorFlow's import starts at once
(`prefetch_tensorflow`: only when a case will need it, so that a run whose cases are
all invalid, cached or numeric never waits for it), on a thread of its own, while the
engine's worker imports the engine; then each case's reference (`reference_run`: TensorFlow's,
the numeric one, or both) is computed here while its engine runs in its worker process
(``isolate="process"``). In this process (``"none"``) the engine runs after the
reference, on this thread: running both at once on threads was slower (TensorFlow's and
BLAS's thread pools contend, and small cases hold the GIL). `Checker` checks one case at
a time with a long-lived engine side (the pytest plugin, `run`), `check_case` a single
case (the Python API's `check`).

Nothing a case's engine does stops the others: it becomes that case's `error`. A run
interrupted by SIGINT or SIGTERM (`interrupts`) reports the cases it finished and marks
the rest `not run`. The exit code is computed from the reports alone (`RunResult`).

Here: `run`; in `options` what a run is told, in `references` a case's reference and
TensorFlow's import, in `checker` one case's steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..cases.loader import Collected
from ..cases.model import Case, InvalidCase
from ..diagnosis import diagnose_run
from ..diagnosis.run.root_causes import known
from ..engines.loading import engine_name
from ..engines.protocol import EngineFactory
from ..references import tensorflow as tensorflow_module
from ..references.computed import computed_reference
from ..references.numeric import LABEL as NUMERIC_LABEL
from ..references.tensorflow import reference_label
from ..results import CaseResult, RunResult
from ..util import interrupts
from .checker import Checker, check_case
from .options import DEFAULT_OPTIONS, Isolation, RunOptions, default_isolation
from .references import (
    overlap,
    prefetch_tensorflow,
    reference_run,
    starting_tensorflow,
    wait_for_import,
)
from .shards import durations_of, record_durations

__all__ = [
    "Checker",
    "Isolation",
    "RunOptions",
    "check_case",
    "computed_reference",
    "default_isolation",
    "prefetch_tensorflow",
    "reference_run",
    "run",
    "starting_tensorflow",
]


def run(
    items: Sequence[Case | InvalidCase] | Collected,
    engine: str | EngineFactory,
    options: RunOptions = DEFAULT_OPTIONS,
    on_result: Callable[[CaseResult], None] | None = None,
    checker: Checker | None = None,
) -> RunResult:
    """Check every case in order; invalid ones are reported as they are, never run.

    `items` are cases, or what `cases.collect` found (then the report says what -k
    deselected, and why nothing ran when nothing was found). `engine` is an ``--engine``
    spec or an engine factory. TensorFlow's import starts at once (when a case's reference
    will need it), as do the workers' imports of the engine. A SIGINT or SIGTERM caught by
    `interrupts.handled` ends the run early with the rest of the cases `not run`; so
    does a failure under `fail_fast`. A `checker` given (`--watch`'s, kept warm between
    runs) is used instead of a new one for `engine`, and left open.
    """
    started = time.perf_counter()
    collected = items if isinstance(items, Collected) else None
    items = collected.items if collected is not None else items
    results: list[CaseResult] = []
    cases = [item for item in items if isinstance(item, Case)]
    prefetch_tensorflow(options, cases)
    interrupted, stopped = None, False
    owned = checker is None
    if owned:
        checker = Checker(engine, options) if cases else None
    try:
        if checker is not None:
            checker.engines.warm()
        for item in items:
            interrupts.check()
            if isinstance(item, Case):
                assert checker is not None
                result = checker.check(item, known(results) if options.diagnose else ())
            else:
                result = _invalid(item)
            results.append(result)
            if on_result:
                on_result(result)
            if options.fail_fast and result.status in ("failed", "error"):
                stopped = len(results) < len(items)
                why = "the run stopped at the first failure (-x)"
                results += [_not_run(item, why) for item in items[len(results) :]]
                break
    except interrupts.Interrupted as stop:
        interrupted = stop.signal
        why = f"the run was interrupted by {stop.signal}"
        results += [_not_run(item, why) for item in items[len(results) :]]
    finally:
        if owned and checker is not None:
            checker.close()
        wait_for_import()
    ended = time.perf_counter()
    if options.record_durations and options.cache is not None and options.cache.writable:
        record_durations(options.cache.directory, durations_of(results))
    startup = _startup(started, ended)
    ran = RunResult(
        engine=checker.engine_name if checker else _name(engine),
        reference=_label(items, options),
        cases=results,
        duration_s=ended - started - overlap(startup, started, ended),
        interrupted=interrupted,
        fail_fast=stopped,
        deselected=collected.deselected if collected is not None else 0,
        nothing_found=collected.nothing_found if collected is not None else None,
        startup_s=startup[1] - startup[0] if startup else 0.0,
        engine_origin=options.engine_origin,
        threads=checker.threads if checker else None,
        config=options.config,
    )
    return diagnose_run(ran, causes=bool(options.diagnose))


def _startup(started: float, ended: float) -> tuple[float, float] | None:
    """TensorFlow's one-off import, when it was still under way as the run started (the
    run, or `prefetch_tensorflow` just before it, began it) and ended before it ended."""
    span = tensorflow_module.import_span
    if span is None or span[1] < started or span[1] > ended:
        return None
    return span


def _label(items: Sequence[Case | InvalidCase], options: RunOptions) -> str:
    """`RunResult.reference`: each kind of reference the cases use, with its version."""
    # No case to run: the run's own reference, named with its version all the same.
    kinds = {i.reference or options.reference for i in items if isinstance(i, Case)} or {
        options.reference
    }
    labels = []
    if kinds & {"tensorflow", "both"}:
        labels.append(reference_label(options.cache and options.cache.tensorflow_version))
    if kinds & {"numeric", "both"}:
        labels.append(NUMERIC_LABEL)
    return " + ".join(labels)


def _invalid(item: InvalidCase) -> CaseResult:
    return CaseResult(
        item.name, item.file, item.line, "invalid", expr=item.expr, message=item.message
    )


def _not_run(item: Case | InvalidCase, why: str) -> CaseResult:
    if isinstance(item, InvalidCase):
        return _invalid(item)
    return CaseResult(
        item.name,
        item.file,
        item.line,
        "not run",
        expr=item.expr,
        message=f"not run: {why}",
        tags=list(item.tags),
    )


def _name(engine: str | EngineFactory) -> str:
    return engine if isinstance(engine, str) else engine_name(engine)
