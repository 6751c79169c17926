"""The pipeline one case flows through: reference and engine runs, comparison, diagnosis.

`check_case` turns a loaded case into a `CaseResult`; `run` does it for a list of cases
and never lets one case's trouble stop the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from .cache import ReferenceCache, ReferenceNotCached
from .cases.model import LOW_PRECISION, Case, InvalidCase
from .comparison.compare import compare
from .comparison.trust import disagreements, judged_part, nothing_judged, tolerance
from .defaults import STALE_CHECK_LIMIT
from .diagnosis import Evidence, diagnose, diagnose_run
from .diagnosis.conventions import declared_conventions, follow_conventions, note_conventions
from .diagnosis.root_causes import known
from .engines.adapters import engine_name
from .engines.driver import (
    EngineFailure,
    EngineRun,
    Unsupported,
    call_engine,
    run_engine,
    traceback_tail,
)
from .engines.numeric import LABEL as NUMERIC_LABEL
from .engines.numeric import numeric_reference
from .engines.protocol import EngineFactory
from .engines.tensorflow import (
    TensorFlowEngine,
    load_tensorflow,
    reference_label,
    silenced_stderr,
)
from .results import CaseResult, Hint, InputResult, RunResult


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


def reference_run(case: Case, options: RunOptions = RunOptions()) -> EngineRun:
    """The case's reference (SPEC §8), from `options.cache` if it has it: TensorFlow's, the
    numeric one (`engines.numeric`), or for `both` TensorFlow's with `doubts` where the
    finite differences disagree with it."""
    kind = case.reference or options.reference
    if kind == "numeric":
        return _cached(case, options, "numeric", numeric_reference)
    reference = _cached(case, options, "tensorflow", _tensorflow_reference)
    if kind == "both":
        numeric = _cached(case, options, "numeric", numeric_reference)
        reference = replace(reference, doubts=disagreements(case, reference, numeric))
    return reference


def _cached(
    case: Case, options: RunOptions, kind: str, compute: Callable[[Case], EngineRun]
) -> EngineRun:
    cache = options.cache
    cached = cache.get(case, kind) if cache is not None else None
    if cached is not None:
        return cached
    if options.require_cache:
        raise ReferenceNotCached(
            cache.not_cached_message(case, kind) if cache else "--require-cache needs a cache"
        )
    reference = compute(case)
    if cache is not None:
        cache.put(case, reference, kind)
    return reference


def _tensorflow_reference(case: Case) -> EngineRun:
    unbuilt = [n.op for n in case.expression.op_nodes if n.op and n.op.tf is None]
    if unbuilt:
        raise EngineFailure(
            f"op {unbuilt[0].name} ({unbuilt[0].origin}) declares no TensorFlow builder (tf=), "
            "so only finite differences can judge it: set `reference: numeric` on the case "
            "or run with --reference numeric"
        )
    try:
        engine = _tensorflow_engine()
    except ImportError as e:
        message = (
            f"TensorFlow is not installed ({e}) and the reference is not cached; install "
            "gradcheck[tensorflow], or use --reference numeric"
        )
        raise EngineFailure(message) from None
    try:
        # TensorFlow's C++ side logs to fd 2 on first use of some kernels (oneDNN, CUDA).
        with silenced_stderr():
            return run_engine(engine, case.expression, case.inputs, case.wrt, case.cotangent)
    except Unsupported as e:  # a NotImplementedError inside TensorFlow
        raise EngineFailure(str(e)) from e


# Seconds spent importing TensorFlow, a one-off cost of the run: `check_case` leaves it
# out of the duration of the case that happens to pay it. Only timed where a reference
# is computed, so a run whose references are all cached still never imports TensorFlow.
_startup_s = 0.0


def _tensorflow_engine() -> TensorFlowEngine:
    global _startup_s
    if not load_tensorflow.cache_info().currsize:
        started = time.perf_counter()
        load_tensorflow()
        _startup_s += time.perf_counter() - started
    return TensorFlowEngine()


def check_case(
    case: Case,
    engine_factory: EngineFactory,
    options: RunOptions = RunOptions(),
    causes: Sequence[tuple[Hint, str]] = (),
) -> CaseResult:
    """`causes`: the run's causes so far (`diagnosis.root_causes.known`)."""
    started, startup = time.perf_counter(), _startup_s
    result = CaseResult(
        case.name,
        case.file,
        case.line,
        "passed",
        expr=case.expr,
        tags=list(case.tags),
        graph=case.expression.outline(),
        reference=case.reference or options.reference,
    )
    try:
        _check(case, engine_factory, options, result, list(causes))
    finally:
        result.duration_s = time.perf_counter() - started - (_startup_s - startup)
    return result


def _check(
    case: Case,
    engine_factory: EngineFactory,
    options: RunOptions,
    result: CaseResult,
    causes: list[tuple[Hint, str]],
) -> None:
    try:
        reference = reference_run(case, options)
    except ReferenceNotCached as missing:
        _error(result, missing.message, missing)
        return
    except EngineFailure as failure:
        kind = case.reference or options.reference
        _error(result, f"the {kind} reference could not be computed: {failure.message}", failure)
        return
    expect_problems = _check_expect(case, reference)
    elements = sum(value.size for value in case.inputs.values())
    limit = options.stale_check_limit
    ask_twice = limit is None or elements <= limit
    try:
        engine = call_engine("creating the engine", engine_factory)
        got = run_engine(
            engine, case.expression, case.inputs, case.wrt, case.cotangent, ask_twice=ask_twice
        )
    except Unsupported as unsupported:
        result.status = "failed" if options.strict else "skipped"
        result.message = f"unsupported: {unsupported}"
        result.unsupported_ops = unsupported.ops
        return
    except EngineFailure as failure:
        _error(result, failure.message, failure)
        if options.diagnose and failure.what in ("grad", "vjp"):  # raised differentiating
            evidence = Evidence(
                case, reference, None, result, engine_factory, failure=failure, known=causes
            )
            result.message = "; ".join([failure.message, *diagnose(evidence)])
        return
    except Exception as e:  # what the driver's checks did not foresee is still the engine's
        failure = EngineFailure(str(e), traceback_tail(e))
        _error(result, f"the engine raised {type(e).__name__}: {e}", failure)
        return

    result.engine_dtype = got.dtype
    declared = declared_conventions(engine_factory)
    tensorflow = reference = judged_part(reference, got)
    reference, followed = follow_conventions(case, reference, declared)
    _compare_all(result, reference, got, case, None)
    failing = not result.forward.passed or any(not i.comparison.passed for i in result.inputs)
    exact = _exact_run(case, options, declared) if failing else None
    if exact is not None:  # low precision: judged by the distance from the exact answer
        _compare_all(result, reference, got, case, exact)
    note_conventions(result.inputs, tensorflow, got, followed, case.tolerance)
    stale = [
        name
        for name, grad in got.grads.items()
        # Within tolerance, not bit for bit: a parallel reduction may round differently.
        if got.grads_again is not None
        and not compare(grad, got.grads_again[name], case.tolerance).passed
    ]
    notes = [*reference.notes, *got.notes, *expect_problems]
    if not ask_twice:
        notes.append(
            f"gradients asked for once: {elements:,} input elements are over the "
            f"stale-gradients check's limit of {limit:,}"
        )
    failed = (
        not result.forward.passed or any(not i.comparison.passed for i in result.inputs) or stale
    )
    result.status = "failed" if failed or expect_problems or reference.doubts else "passed"
    if result.status == "passed" and nothing_judged(reference):
        result.status = "skipped"  # the reference could judge no gradient element at all
    if failed:
        evidence = Evidence(
            case,
            reference,
            got,
            result,
            engine_factory,
            stale,
            conventions=declared,
            known=causes,
            brief=options.diagnose != "all",
        )
        notes += diagnose(evidence) if options.diagnose else []
    elif any(item.hints for item in result.inputs):
        notes.append("passed under the engine's declared conventions")
    result.hints[:0] = reference.doubts  # the oracle in doubt comes before what it judged
    result.message = "; ".join(notes)


def _label(items: Sequence[Case | InvalidCase], options: RunOptions) -> str:
    """`RunResult.reference`: each kind of reference the cases use, with its version."""
    kinds = {i.reference or options.reference for i in items if isinstance(i, Case)}
    if not kinds:
        return options.reference
    labels = []
    if kinds & {"tensorflow", "both"}:
        labels.append(reference_label(options.cache and options.cache.tensorflow_version))
    if kinds & {"numeric", "both"}:
        labels.append(NUMERIC_LABEL)
    return " + ".join(labels)


def _compare_all(
    result: CaseResult, reference: EngineRun, got: EngineRun, case: Case, exact: EngineRun | None
) -> None:
    result.forward = compare(
        reference.forward, got.forward, case.tolerance, exact and exact.forward
    )
    result.inputs = [
        InputResult(
            name,
            compare(
                reference.grads[name],
                grad,
                tolerance(case, reference, name),
                exact and exact.grads[name],
            ),
        )
        for name, grad in got.grads.items()
    ]


def _exact_run(case: Case, options: RunOptions, declared: dict[str, str]) -> EngineRun | None:
    """Low precision (float16, bfloat16) without a tolerance of its own: the reference's
    float64 answer for the same rounded inputs, what both engines are judged against."""
    if case.dtype not in LOW_PRECISION or case.tolerance_given:
        return None
    wide = replace(
        case,
        dtype="float64",
        inputs={n: np.asarray(v, np.float64) for n, v in case.inputs.items()},
        cotangent=np.asarray(case.cotangent, np.float64),
    )
    try:
        return follow_conventions(wide, reference_run(wide, options), declared)[0]
    except (EngineFailure, ReferenceNotCached):
        return None  # judged by the tolerance alone


def _check_expect(case: Case, reference: EngineRun) -> list[str]:
    """`expect` pins the oracle: the reference must still give the pinned gradients."""
    problems = []
    for name, pinned in case.expect.items():
        check = compare(pinned, reference.grads[name], case.tolerance)
        if not check.passed:
            problems.append(
                f"TensorFlow's gradient for {name} no longer matches the pinned `expect` "
                f"(max abs diff {check.max_abs_diff})"
            )
    return problems


def _error(result: CaseResult, message: str, failure: EngineFailure) -> None:
    result.status = "error"
    result.message = message
    result.traceback = failure.traceback_tail


def run(
    items: Sequence[Case | InvalidCase],
    engine_factory: EngineFactory,
    options: RunOptions = RunOptions(),
    on_result: Callable[[CaseResult], None] | None = None,
) -> RunResult:
    """Check every case in order; invalid ones are reported as they are, never run."""
    started = time.perf_counter()
    results: list[CaseResult] = []
    for item in items:
        if isinstance(item, InvalidCase):
            outcome = CaseResult(
                item.name, item.file, item.line, "invalid", expr=item.expr, message=item.message
            )
        else:
            causes = known(results) if options.diagnose else []
            outcome = check_case(item, engine_factory, options, causes)
        results.append(outcome)
        if on_result:
            on_result(outcome)
        if options.fail_fast and outcome.status in ("failed", "error"):
            break
    ran = RunResult(
        engine=engine_name(engine_factory),
        reference=_label(items, options),
        cases=results,
        duration_s=time.perf_counter() - started,
    )
    return diagnose_run(ran, causes=bool(options.diagnose))
