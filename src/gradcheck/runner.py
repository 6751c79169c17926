"""The pipeline a run's cases flow through: reference and engine side by side, then the
verdict (here, always) and the diagnosis (where the engine runs).

`run` checks a list of cases and overlaps the work: TensorFlow's import starts at once
(`prefetch_tensorflow`), on a thread of its own, while the files load and the engine's
worker imports the engine; then each case's reference (`reference_run`: TensorFlow's,
the numeric one, or both) is computed here while its engine runs in its worker process
(``isolate="process"``). In this process (``"none"``) the engine runs after the
reference, on this thread: running both at once on threads was slower (TensorFlow's and
BLAS's thread pools contend, and small cases hold the GIL). `Checker` checks one case at
a time with a long-lived engine side (the pytest plugin, `run`), `check_case` a single
case (the Python API's `check`).

Nothing a case's engine does stops the others: it becomes that case's `error`. A run
interrupted by SIGINT or SIGTERM (`interrupts`) reports the cases it finished and marks
the rest `not run`. The exit code is computed from the reports alone (`RunResult`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from . import interrupts
from .cache import ReferenceCache, ReferenceNotCached
from .cases.loader import Collected
from .cases.model import LOW_PRECISION, Case, InvalidCase
from .checking import (
    Diagnose,
    EngineOutcome,
    Known,
    error,
    expect_problems,
    new_result,
    to_diagnose,
    verdict,
)
from .comparison.trust import disagreements
from .config import engine_named
from .defaults import STALE_CHECK_LIMIT, TIMEOUT
from .diagnosis import diagnose_run
from .diagnosis.conventions import follow_conventions
from .diagnosis.root_causes import known
from .engines import tensorflow as tensorflow_module
from .engines.adapters import engine_spec, load_engine
from .engines.driver import EngineFailure, EngineRun, Unsupported
from .engines.numeric import LABEL as NUMERIC_LABEL
from .engines.numeric import numeric_reference
from .engines.numeric_modes import numeric_hvp, numeric_jvp
from .engines.protocol import EngineFactory
from .engines.tensorflow import TensorFlowEngine, load_tensorflow, reference_label, silenced_stderr
from .errors import UsageError
from .modes import checks, mode_verdict, run_check, with_modes
from .ops.user import loaded_ops_files
from .results import CaseResult, Hint, RunResult
from .workers.engines import InProcess, Isolated, Ticket
from .workers.pool import SUPPORTED as workers_supported
from .workers.pool import WorkerLost, worker_init

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
    stale_check_limit: int | None = STALE_CHECK_LIMIT  # input elements; None: every case
    reference: str = "tensorflow"  # tensorflow | numeric | both, where a case sets none
    isolate: Isolation = "none"  # where the engine runs: worker processes, or this one
    timeout: float = TIMEOUT  # seconds per case in a worker (a case's `timeout:` wins)
    modes: tuple[str, ...] = ("rev",)  # rev and/or fwd, where a case sets none
    order: int = 1  # 2: second order too, where a case sets no order
    # Where the engine was set ("--engine", "pyproject.toml", "default"; `config.Settings`),
    # for the report and for the engine's errors; None: not said.
    engine_origin: str | None = None


# The numeric reference of each check (vjp: gradients, jvp: forward mode, hvp: second order).
_NUMERIC = {"vjp": numeric_reference, "jvp": numeric_jvp, "hvp": numeric_hvp}


def reference_run(case: Case, options: RunOptions = RunOptions()) -> EngineRun:
    """The case's reference (SPEC §8), from `options.cache` if it has it: TensorFlow's, the
    numeric one (`engines.numeric`), or for `both` TensorFlow's with `doubts` where the
    finite differences disagree with it; with the forward-mode and second-order runs
    the case asks for (`EngineRun.jvp`, `EngineRun.hvp`)."""
    runs = {check: _reference(case, options, check) for check in checks(case, options)}
    return with_modes(runs.pop("vjp", None), runs)


def _reference(case: Case, options: RunOptions, check: str) -> EngineRun:
    kind = case.reference or options.reference
    if kind == "numeric":
        return _cached(case, options, "numeric", check)
    reference = _cached(case, options, "tensorflow", check)
    if kind == "both":
        numeric = _cached(case, options, "numeric", check)
        reference = replace(reference, doubts=disagreements(case, reference, numeric, check))
    return reference


def _cached(case: Case, options: RunOptions, kind: str, check: str) -> EngineRun:
    cache = options.cache
    cached = cache.get(case, kind, check) if cache is not None else None
    if cached is not None:
        return cached
    if options.require_cache:
        raise ReferenceNotCached(
            cache.not_cached_message(case, kind) if cache else "--require-cache needs a cache"
        )
    reference = computed_reference(case, kind, check)
    if cache is not None:
        cache.put(case, reference, kind, check)
    return reference


def computed_reference(case: Case, kind: str, check: str = "vjp") -> EngineRun:
    """The `kind` reference of `case` ("tensorflow" or "numeric") for `check`, computed,
    no cache."""
    return _NUMERIC[check](case) if kind == "numeric" else _tensorflow_reference(case, check)


def _tensorflow_reference(case: Case, check: str = "vjp") -> EngineRun:
    unbuilt = [n.op for n in case.expression.op_nodes if n.op and n.op.tf is None]
    if unbuilt:
        raise EngineFailure(
            f"op {unbuilt[0].name} ({unbuilt[0].origin}) declares no TensorFlow builder (tf=), "
            "so only finite differences can judge it: set `reference: numeric` on the case "
            "or run with --reference numeric"
        )
    try:
        # Forward mode records on no tape; second order on two, nested.
        engine = TensorFlowEngine(order={"vjp": 1, "jvp": 0, "hvp": 2}[check])
    except ImportError as e:
        message = (
            f"TensorFlow is not installed ({e}) and the reference is not cached; install "
            "gradcheck[tensorflow], or use --reference numeric"
        )
        raise EngineFailure(message) from None
    try:
        # TensorFlow's C++ side logs to fd 2 on first use of some kernels (oneDNN, CUDA).
        with silenced_stderr():
            return run_check(engine, case, check)
    except Unsupported as e:  # a NotImplementedError inside TensorFlow
        raise EngineFailure(str(e)) from e


def default_isolation(engine: str | EngineFactory) -> Isolation:
    """Where an engine runs unless told: the builtin engine in this process, any other named
    engine (an ``--engine`` spec) in workers (on a POSIX system); an engine given as a
    Python object in this process, as it belongs to its caller."""
    if not isinstance(engine, str) or not workers_supported:
        return "none"
    return "none" if engine == "builtin" else "process"


# -- TensorFlow's import -------------------------------------------------------------

_import: threading.Thread | None = None  # the one background import of this process


def prefetch_tensorflow() -> None:
    """Start importing TensorFlow on a thread of its own, if it is installed and not yet
    imported; a reference that needs it then waits for it (`load_tensorflow`'s lock)."""
    global _import
    if _import is None and tensorflow_module.installed_version() is not None:
        _import = threading.Thread(target=_import_quietly, name="gradcheck-import", daemon=True)
        _import.start()


def starting_tensorflow() -> bool:
    """Whether TensorFlow's one-off import is under way (the progress bar says so)."""
    return (_import is not None and _import.is_alive()) or tensorflow_module.importing()


def _import_quietly() -> None:
    with contextlib.suppress(Exception):  # a broken install is reported by the case needing it
        load_tensorflow()


def _import_done() -> None:
    """Wait for the background import: nothing of TensorFlow's runs once `run` returns."""
    if _import is not None:
        _import.join()


def needs_tensorflow(options: RunOptions) -> bool:
    """Whether a run is sure to need TensorFlow: its reference is TensorFlow's (or both),
    and there is no cache to read it from, or nothing in it yet. (A case that sets its own
    `reference:` imports TensorFlow when it needs it.)"""
    cache = options.cache
    if options.require_cache or options.reference == "numeric":
        return False
    if cache is None:
        return True
    try:
        return not any(cache.folder().iterdir())
    except OSError:
        return True


# -- one case --------------------------------------------------------------------------


class Checker:
    """Checks cases with one engine side (a worker pool, or this process) kept between them."""

    def __init__(self, engine: str | EngineFactory, options: RunOptions = RunOptions()) -> None:
        self.options = options
        self.spec = engine if isinstance(engine, str) else engine_spec(engine)
        if options.isolate == "process":
            if self.spec is None:
                raise UsageError(
                    f"engine {engine!r} cannot run in a worker process: it has no importable "
                    "name (a class defined in __main__, a function); pass an --engine spec "
                    "('path/file.py:Class') or isolate='none'"
                )
            init = worker_init(self.spec, loaded_ops_files(), self.named)
            self.engines: InProcess | Isolated = Isolated(init, options.timeout)
        else:
            factory = load_engine(engine, self.named) if isinstance(engine, str) else engine
            self.engines = InProcess(factory)

    @property
    def named(self) -> str:
        """How the engine's errors name it: as given, and where it was set."""
        return engine_named(str(self.spec), self.options.engine_origin or "--engine")

    @property
    def engine_name(self) -> str:
        return self.engines.engine or str(self.spec or "engine")

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engines.close()

    def ask_twice(self, case: Case) -> bool:
        limit = self.options.stale_check_limit
        return limit is None or case.elements <= limit

    def start(self, case: Case) -> Ticket:
        timeout = case.timeout or self.options.timeout
        return self.engines.start(case, self.ask_twice(case), timeout, checks(case, self.options))

    def check(self, case: Case, causes: Sequence[tuple[Hint, str]] = ()) -> CaseResult:
        """One case, start to end: the engine starts in its worker, the reference is
        computed here meanwhile (in this process, the engine runs after it). `causes`:
        the run's causes so far (`diagnosis.root_causes.known`), for its diagnosis."""
        try:
            started = time.perf_counter()
            ticket = self.start(case)
            reference = _Reference(case, self.options)
            if isinstance(self.engines, Isolated):
                case.release()  # its worker has its own copy: ours may go before its reply comes
            prior = Known(list(causes), brief=self.options.diagnose != "all")
            return self._finish(ticket, reference, started, prior)
        finally:
            case.release()

    def _finish(
        self, ticket: Ticket, reference: _Reference, started: float, prior: Known
    ) -> CaseResult:
        case, options = ticket.case, self.options
        kind = case.reference or options.reference
        result = new_result(case, kind)
        try:
            outcome, captured = self.engines.outcome(ticket)
        except WorkerLost as lost:
            outcome, captured = EngineOutcome(error=lost.message), lost.captured
        result.captured = captured
        try:
            reference_run_ = reference.get()
        except ReferenceNotCached as missing:
            return self._done(error(result, missing.message), ticket, started, reference)
        except EngineFailure as failure:
            message = f"the {kind} reference could not be computed: {failure.message}"
            error(result, message, failure.traceback_tail)
            return self._done(result, ticket, started, reference)
        reverse = "vjp" in ticket.checks
        stale: list[str] = []
        if reverse:
            reference_run_, stale = self._verdict(ticket, reference_run_, outcome, result)
        else:  # forward mode (and second order) alone
            result.message = "; ".join(reference_run_.notes)
        diagnose_reverse = reverse and to_diagnose(result, outcome, stale)
        modes = mode_verdict(case, reference_run_, outcome, result, options)
        if options.diagnose and (diagnose_reverse or modes):
            try:
                request = Diagnose(reference_run_, result, stale, prior, diagnose_reverse, modes)
                diagnosis_notes, output = self.engines.diagnose(ticket, request)
            except WorkerLost as lost:
                diagnosis_notes, output = [f"diagnosis stopped: {lost.message}"], lost.captured
            result.message = "; ".join(filter(None, [result.message, *diagnosis_notes]))
            if output:
                result.captured += f"\n[while diagnosing]\n{output}" if captured else output
        result.hints[:0] = reference_run_.doubts  # the oracle in doubt before what it judged
        return self._done(result, ticket, started, reference)

    def _verdict(
        self, ticket: Ticket, reference: EngineRun, outcome: EngineOutcome, result: CaseResult
    ) -> tuple[EngineRun, list[str]]:
        """Reverse mode's verdict (`checking.verdict`), with `expect` and the stale check."""
        case, options = ticket.case, self.options
        problems = expect_problems(case, reference)
        notes = list(problems)
        if not ticket.ask_twice:
            notes.append(
                f"gradients asked for once: {case.elements:,} input elements are over the "
                f"stale-gradients check's limit of {options.stale_check_limit:,}"
            )
        declared = self.engines.conventions
        return verdict(
            case, reference, outcome, result,
            strict=options.strict, notes=notes, declared=declared,
            exact=lambda: _exact_run(case, options, declared), expect_failed=bool(problems),
        )  # fmt: skip

    def _done(
        self, result: CaseResult, ticket: Ticket, started: float, reference: _Reference
    ) -> CaseResult:
        """Release the engine's hold on the case; time it without TensorFlow's import."""
        self.engines.release(ticket)
        result.duration_s = time.perf_counter() - started - reference.import_wait()
        return result


class _Reference:
    """A case's reference, computed at once; how long it waited for TensorFlow's one-off
    import, which case durations leave out."""

    def __init__(self, case: Case, options: RunOptions) -> None:
        begun = time.perf_counter()
        try:
            self.value, self.error = reference_run(case, options), None
        except EngineFailure as e:
            self.value, self.error = None, e
        self.span = begun, time.perf_counter()

    def get(self) -> EngineRun:
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value

    def import_wait(self) -> float:
        """The seconds of TensorFlow's import that this case spent waiting for."""
        return _overlap(tensorflow_module.import_span, *self.span)


def _exact_run(case: Case, options: RunOptions, declared: dict[str, str]) -> EngineRun | None:
    """Low precision (float16, bfloat16) without a tolerance of its own: the reference's
    float64 answer for the same rounded inputs, what both engines are judged against."""
    if case.dtype not in LOW_PRECISION or case.tolerance_given:
        return None
    wide = case.widened()
    try:
        return follow_conventions(wide, reference_run(wide, options), declared)[0]
    except (EngineFailure, ReferenceNotCached):
        return None  # judged by the tolerance alone


def check_case(
    case: Case,
    engine: str | EngineFactory,
    options: RunOptions = RunOptions(),
    causes: Sequence[tuple[Hint, str]] = (),
) -> CaseResult:
    """Check one case: the reference, the engine (where `options.isolate` says), the
    verdict, the diagnosis (`causes`: the run's so far, `diagnosis.root_causes.known`)."""
    with Checker(engine, options) as checker:
        return checker.check(case, causes)


# -- a run -----------------------------------------------------------------------------


def run(
    items: Sequence[Case | InvalidCase] | Collected,
    engine: str | EngineFactory,
    options: RunOptions = RunOptions(),
    on_result: Callable[[CaseResult], None] | None = None,
) -> RunResult:
    """Check every case in order; invalid ones are reported as they are, never run.

    `items` are cases, or what `cases.collect` found (then the report says what -k
    deselected, and why nothing ran when nothing was found). `engine` is an ``--engine``
    spec or an engine factory. TensorFlow's import starts at once (when a reference may
    need it), as do the workers' imports of the engine. A SIGINT or SIGTERM caught by
    `interrupts.handled` ends the run early with the rest of the cases `not run`; so
    does a failure under `fail_fast`.
    """
    started = time.perf_counter()
    collected = items if isinstance(items, Collected) else None
    items = collected.items if collected is not None else items
    results: list[CaseResult] = []
    cases = [item for item in items if isinstance(item, Case)]
    if cases and needs_tensorflow(options):
        prefetch_tensorflow()
    interrupted, stopped = None, False
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
        if checker is not None:
            checker.close()
        _import_done()
    ended = time.perf_counter()
    startup = _startup(started, ended)
    ran = RunResult(
        engine=checker.engine_name if checker else _name(engine),
        reference=_label(items, options),
        cases=results,
        duration_s=ended - started - _overlap(startup, started, ended),
        interrupted=interrupted,
        fail_fast=stopped,
        deselected=collected.deselected if collected is not None else 0,
        nothing_found=collected.nothing_found if collected is not None else None,
        startup_s=startup[1] - startup[0] if startup else 0.0,
        engine_origin=options.engine_origin,
    )
    return diagnose_run(ran, causes=bool(options.diagnose))


def _startup(started: float, ended: float) -> tuple[float, float] | None:
    """TensorFlow's one-off import, when it was still under way as the run started (the
    run, or `prefetch_tensorflow` just before it, began it) and ended before it ended."""
    span = tensorflow_module.import_span
    if span is None or span[1] < started or span[1] > ended:
        return None
    return span


def _overlap(span: tuple[float, float] | None, started: float, ended: float) -> float:
    return 0.0 if span is None else max(0.0, min(span[1], ended) - max(span[0], started))


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
    from .engines.adapters import engine_name

    return engine if isinstance(engine, str) else engine_name(engine)
