"""The API's calls: `check` one expression, `run` case files, `fuzz` an engine; each
resolves its keywords as the command line does its options (`config.Settings`)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import CaseFileError, UsageError
from .engines import EngineSpec, chosen_engine, factory_of, relative, spec_of
from .results import CheckResult, FuzzReport, RunReport

if TYPE_CHECKING:
    from ..config import Settings

DEFAULT_NAME = "check"


class InvalidCaseError(CaseFileError):
    """`check` was given a case the loader refuses; the message says what to change.

    `file` and `line` are the call site's (there is no case file), `name` the case's.
    """

    def __init__(self, message: str, *, file: str, line: int, name: str) -> None:
        super().__init__(message, line)
        self.file = file
        self.name = name


def check(
    expr: str,
    inputs: Mapping[str, Any],
    engine: EngineSpec | None = None,
    *,
    diagnose: bool = True,
    max_elements: int | None = None,
    stale_check_limit: int | None = None,
    cache: bool | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    ops: Sequence[str | os.PathLike[str]] | None = None,
    isolate: str | None = None,
    timeout: float | None = None,
    **case_options: Any,
) -> CheckResult:
    """Check `engine`'s gradients of `expr` at `inputs` against TensorFlow.

    `case_options` are case-file keys (name, description, wrt, dtype, cotangent, tolerance,
    seed, expect, tags, reference, modes, order), validated as a case file's are: an unknown
    or bad one raises `InvalidCaseError`. `name` defaults to "check" (random inputs and
    cotangents are seeded from it unless `seed` is given). `engine` is "builtin", an
    ``--engine`` spec ("path/file.py:Class", "package.module:Class"), an engine class
    or a zero-argument factory: every run of the case gets a fresh engine. Cases with
    more input elements than `stale_check_limit` ask for the gradients once (0: twice
    always, the stale-gradients check). `ops` are ops files to load first (``--ops``).
    `isolate` is "process", "none" or None (see the module's notes). Options left at
    None are the config file's, else the defaults, as `gradcheck run`'s are (its
    ``rtol``/``atol`` excepted: a check's tolerance is its `tolerance`).
    """
    from ..cases.loader import load_case
    from ..cases.model import InvalidCase
    from ..runner import check_case

    given = dict(engine=engine, max_elements=max_elements, stale_check_limit=stale_check_limit,
                 cache=cache, cache_dir=cache_dir, ops=ops, timeout=timeout)  # fmt: skip
    settings = _settings(given)
    file, line = _caller()
    data = {"name": DEFAULT_NAME, **case_options, "expr": expr, "inputs": _input_values(inputs)}
    item = load_case(data, file=file, line=line, max_elements=settings.max_elements)
    if isinstance(item, InvalidCase):
        raise InvalidCaseError(item.message, file=file, line=item.line, name=item.name)
    engine, origin = chosen_engine(engine, settings)
    options = _options(settings, engine, diagnose=diagnose, isolate=isolate, engine_origin=origin)
    return CheckResult(check_case(item, engine, options))


def run(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    engine: EngineSpec | None = None,
    *,
    keyword: str | None = None,
    strict: bool = False,
    fail_fast: bool = False,
    diagnose: bool | Literal["first", "all"] = True,
    rtol: float | None = None,
    atol: float | None = None,
    max_elements: int | None = None,
    stale_check_limit: int | None = None,
    cache: bool | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    reference: str | None = None,
    ops: Sequence[str | os.PathLike[str]] | None = None,
    isolate: str | None = None,
    timeout: float | None = None,
    modes: Sequence[str] = ("rev",),
    order: int = 1,
) -> RunReport:
    """`gradcheck run` from Python: every case of the files and folders `paths` names.

    The options are the command line's (`keyword` is ``-k``; `diagnose` is ``--diagnose``,
    True meaning "first", and False ``--no-diagnose``; `reference` is ``--reference``,
    `ops` ``--ops``, `cache=False` ``--no-cache``, `modes` and `order` ``--modes`` and
    ``--order``), and so are their defaults: an option left at None is the config file's,
    else the default. The report's `root_causes` and `ops` are the run's diagnosis and
    report card.
    Invalid cases are reported in the result (exit code 2), not raised, and so is a run
    with no case to check (exit code 5); a path that does not exist, a malformed
    `keyword` or a bad engine raises a `GradcheckError`.
    """
    from ..cases import collect
    from ..checking.modes import run_defaults
    from ..runner import run as run_cases

    if diagnose not in (True, False, "first", "all"):
        raise UsageError(f"diagnose must be True, False, 'first' or 'all', not {diagnose!r}")
    modes, order = run_defaults(modes, order)
    given = dict(paths=paths, engine=engine, rtol=rtol, atol=atol, max_elements=max_elements,
                 stale_check_limit=stale_check_limit, cache=cache, cache_dir=cache_dir,
                 reference=reference, ops=ops, timeout=timeout)  # fmt: skip
    settings = _settings(given)
    items = collect(
        list(settings.paths),
        keyword=keyword,
        max_elements=settings.max_elements,
        rtol=settings.rtol,
        atol=settings.atol,
    )
    engine, origin = chosen_engine(engine, settings)
    options = _options(
        settings,
        engine,
        strict=strict,
        fail_fast=fail_fast,
        diagnose=diagnose,
        isolate=isolate,
        modes=modes,
        order=order,
        engine_origin=origin,
    )
    return RunReport(run_cases(items, engine, options))


def fuzz(
    engine: EngineSpec | None = None,
    *,
    ops: Sequence[str] | None = None,
    max_examples: int = 200,
    time: float | None = None,
    max_bugs: int | None = None,
    max_ops: int = 4,
    max_rank: int = 3,
    seed: int = 0,
    dtypes: Sequence[str] = ("float64", "float32"),
    out: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    reference: str | None = None,
) -> FuzzReport:
    """`gradcheck fuzz` from Python: generate cases over the ops `engine` has (or `ops`),
    and shrink each bug found to its smallest case.

    The options are the command line's (`time` is ``--time``, `max_bugs=1` is ``-x``),
    with two differences for tests: 200 examples by default, and seed 0, so that a test
    is the same on every run (pass another seed to look elsewhere). Case files are
    written only to `out`. As on the command line, the engine, the reference and the
    ops files are the config file's unless given; the cache is none unless `cache_dir`.
    """
    from ..fuzzing import Budget, fuzz_engine

    given = {"engine": engine, "reference": reference, "cache": cache_dir is not None,
             "cache_dir": cache_dir}  # fmt: skip
    settings = _settings(given)
    engine, origin = chosen_engine(engine, settings)
    run = fuzz_engine(
        factory_of(engine, settings),
        ops=ops,
        dtypes=dtypes,
        max_ops=max_ops,
        max_rank=max_rank,
        budget=Budget(max_examples, time, max_bugs),
        seed=seed,
        out=None if out is None else Path(out),
        engine_spec=spec_of(engine),
        options=_options(settings, engine, isolate="none", engine_origin=origin),  # runs here
    )
    return FuzzReport(run)


# -- helpers ---------------------------------------------------------------------------


def _settings(given: dict[str, Any]) -> Settings:
    """The call's settings: the keywords `given`, else the config file's, else the
    defaults (an engine given as a Python object is the caller's, not a setting); their
    ops files are loaded."""
    from ..config import settings
    from ..ops.user import load_ops_files

    spec = given.get("engine")
    chosen = settings({**given, "engine": spec if isinstance(spec, str) else None}, _keyword)
    load_ops_files(list(chosen.ops))
    return chosen


def _keyword(key: str) -> str:
    return f"{key}="


def _options(
    settings: Settings, engine: Any = None, *, isolate: str | None = None, **options: Any
) -> Any:
    if isolate not in (None, "process", "none"):
        raise UsageError(f"isolate must be 'process', 'none' or None, not {isolate!r}")
    return settings.run_options(engine, isolate=isolate, **options)


def _input_values(inputs: Any) -> Any:
    """Arrays from other libraries as NumPy; everything else as given, for the loader to judge."""
    if not isinstance(inputs, Mapping):
        return inputs  # the loader says what inputs must be
    return {name: _input_value(value) for name, value in inputs.items()}


def _input_value(value: Any) -> Any:
    if isinstance(value, (Mapping, list, tuple, int, float, str, bool)) or value is None:
        return value
    import numpy as np

    try:
        array = np.asarray(value)
        if array.dtype.kind not in "biufV":
            return value
        return array.astype(np.float64) if array.dtype.kind == "V" else array  # bfloat16
    except (TypeError, ValueError):
        return value


def _caller() -> tuple[str, int]:
    """The file and line that called the API (outside this module), for reports and errors."""
    frame = inspect.currentframe()
    here = frame.f_code.co_filename if frame else __file__
    while frame is not None and frame.f_code.co_filename == here:
        frame = frame.f_back
    if frame is None:
        return "<python>", 1
    return relative(frame.f_code.co_filename), frame.f_lineno
