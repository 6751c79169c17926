"""One case at a time: `Checker` keeps an engine side (a worker pool, or this process)
between cases; the reference is computed here while the engine runs (in this process,
after it), then the verdict, then the diagnosis where the engine runs."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..cases.dtypes import LOW_PRECISION
from ..cases.model import Case
from ..checking.diagnosis_step import Diagnose, Known
from ..checking.engine_step import EngineOutcome
from ..checking.modes import checks, mode_verdict
from ..checking.verdict import error, expect_problems, new_result, to_diagnose, verdict
from ..diagnosis.mechanisms.conventions import follow_conventions
from ..engines.driver import EngineFailure, EngineRun
from ..engines.loading import engine_spec, load_engine
from ..engines.naming import engine_named
from ..engines.protocol import EngineFactory
from ..errors import UsageError
from ..ops.user import loaded_ops_files
from ..references.cache import ReferenceNotCached
from ..references.tensorflow import intra_op_threads, limit_threads
from ..results import CaseResult, Hint
from .options import DEFAULT_OPTIONS, RunOptions
from .references import CaseReference, import_within, reference_kind, reference_run
from .threads import thread_budget
from .workers.engines import InProcess, Isolated, Ticket
from .workers.messages import worker_init
from .workers.pool import WorkerLost


class Checker:
    """Checks cases with one engine side (a worker pool, or this process) kept between them."""

    def __init__(self, engine: str | EngineFactory, options: RunOptions = DEFAULT_OPTIONS) -> None:
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
            # The two run side by side only here: in this process, one after the other.
            self.budget = thread_budget(options.threads)
            if self.budget is not None:
                limit_threads(self.budget.reference)
        else:
            self.budget = None
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

    @property
    def threads(self) -> str:
        """The thread budget, as `--verbose` reports it."""
        if isinstance(self.engines, InProcess):
            return "threads: left alone (the engine runs in this process, after the reference)"
        if self.budget is None:
            return "threads: left alone (--threads off)"
        given = intra_op_threads()
        if given is not None and given != self.budget.reference:
            return f"{self.budget.describe()}; TensorFlow was started with {given} already"
        return self.budget.describe()

    def start(self, case: Case) -> Ticket:
        timeout = case.timeout or self.options.timeout
        wanted = checks(case, self.options.modes, self.options.order)
        # The worker's threads are limited only while this process computes the reference.
        threads = self.budget.engine if self.budget and self._computes(case, wanted) else None
        return self.engines.start(case, self.ask_twice(case), timeout, wanted, threads)

    def _computes(self, case: Case, wanted: Sequence[str]) -> bool:
        """Whether this process computes a reference of `case` (one is not cached)."""
        cache, kind = self.options.cache, case.reference or self.options.reference
        if cache is None:
            return True
        kinds = ("tensorflow", "numeric") if kind == "both" else (kind,)
        paths = [cache.path(case, k, check) for k in kinds for check in wanted]
        return not all(path is not None and path.exists() for path in paths)

    def check(self, case: Case, causes: Sequence[tuple[Hint, str]] = ()) -> CaseResult:
        """One case, start to end: the engine starts in its worker, the reference is
        computed here meanwhile (in this process, the engine runs after it). `causes`:
        the run's causes so far (`diagnosis.run.root_causes.known`), for its diagnosis."""
        try:
            started = time.perf_counter()
            ticket = self.start(case)
            reference = CaseReference(case, self.options)
            if isinstance(self.engines, Isolated):
                case.release()  # its worker has its own copy: ours may go before its reply comes
            prior = Known(list(causes), brief=self.options.diagnose != "all")
            return self._finish(ticket, reference, started, prior)
        finally:
            case.release()

    def _finish(
        self, ticket: Ticket, reference: CaseReference, started: float, prior: Known
    ) -> CaseResult:
        case, options = ticket.case, self.options
        kind = reference_kind(case, options)
        result = new_result(case, kind)
        try:
            outcome, captured = self.engines.outcome(ticket)
        except WorkerLost as lost:
            outcome, captured = EngineOutcome(error=lost.message), lost.captured
        result.captured = captured
        try:
            reference_run_ = reference.get()
        except ReferenceNotCached as missing:
            return self._done(error(result, missing.message), ticket, started)
        except EngineFailure as failure:
            message = f"the {kind} reference could not be computed: {failure.message}"
            error(result, message, failure.traceback_tail)
            result.reference_failed = True
            return self._done(result, ticket, started)
        reverse = "vjp" in ticket.checks
        stale: list[str] = []
        if reverse:
            reference_run_, stale = self._verdict(ticket, reference_run_, outcome, result)
        else:  # forward mode (and second order) alone
            result.message = "; ".join(reference_run_.notes)
        diagnose_reverse = reverse and to_diagnose(result, outcome, stale)
        modes = mode_verdict(
            case, reference_run_, outcome, result,
            modes=options.modes, order=options.order, strict=options.strict,
            exact=lambda check: _exact_mode(case, options, check),
        )  # fmt: skip
        if options.diagnose and (diagnose_reverse or modes):
            try:
                request = Diagnose(
                    reference_run_, result, stale, prior, diagnose_reverse, modes,
                    timeout=ticket.timeout,
                )  # fmt: skip
                diagnosis_notes, output = self.engines.diagnose(ticket, request)
            except WorkerLost as lost:
                diagnosis_notes, output = [f"diagnosis stopped: {lost.message}"], lost.captured
            result.message = "; ".join(filter(None, [result.message, *diagnosis_notes]))
            if output:
                result.captured += f"\n[while diagnosing]\n{output}" if captured else output
        result.hints[:0] = reference_run_.doubts  # the oracle in doubt before what it judged
        return self._done(result, ticket, started)

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

    def _done(self, result: CaseResult, ticket: Ticket, started: float) -> CaseResult:
        """Release the engine's hold on the case; time it without TensorFlow's import,
        whatever the case was waiting on meanwhile (its reference, or its engine's worker,
        whose start competes with the import), as the run's duration leaves it out."""
        self.engines.release(ticket)
        ended = time.perf_counter()
        result.duration_s = ended - started - import_within(started, ended)
        return result


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


def _exact_mode(case: Case, options: RunOptions, check: str) -> EngineRun | None:
    """float16/bfloat16 in forward mode or second order: the reference's float64 answer on
    the same rounded inputs and directions, what both engines are judged against."""
    try:
        return getattr(reference_run(case.widened(), options), check)
    except (EngineFailure, ReferenceNotCached):
        return None  # judged by the tolerance alone


def check_case(
    case: Case,
    engine: str | EngineFactory,
    options: RunOptions = DEFAULT_OPTIONS,
    causes: Sequence[tuple[Hint, str]] = (),
) -> CaseResult:
    """Check one case: the reference, the engine (where `options.isolate` says), the
    verdict, the diagnosis (`causes`: the run's so far, `diagnosis.run.root_causes.known`)."""
    with Checker(engine, options) as checker:
        return checker.check(case, causes)
