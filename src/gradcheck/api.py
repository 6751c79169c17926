"""The Python API: check one expression, or run case files, without the command line.

    import gradcheck

    result = gradcheck.check(
        "sum(x * y, axis=1)",
        {"x": {"shape": [2, 3]}, "y": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]},
        engine=MyEngine,             # a class, a zero-argument factory or an --engine spec
        cotangent="random",          # any case-file key: wrt, dtype, tolerance, seed, ...
    )
    assert result.passed, result     # str(result) is the plain-text report
    result.inputs["x"].max_abs_diff  # per input: status, shapes, diffs, arrays, hints
    result.hints[0].code             # the best explanation, e.g. "fault:mul.self"

    report = gradcheck.run("cases/", engine="my_engine.py:Engine", keyword="matmul")
    assert report.passed, report     # every case's plain text, then the summary line

    found = gradcheck.fuzz(engine=MyEngine, max_examples=300, seed=0)
    assert found.passed, found       # each bug's diagnosis and its smallest case file
    found.cases[0].yaml              # a case file that reproduces the first bug

`check` builds its case with the case-file loader (`cases.loader.load_case`), so its
keyword options are validated exactly as a case file's keys are; a bad one raises
`InvalidCaseError` (a `GradcheckError`) saying what to change. Input values may be
numbers, nested lists, NumPy arrays (or anything `np.asarray` reads, such as another
framework's tensors) or a random spec ``{"shape": [...], "init": ..., "seed": ...}``.

Where the command line and the API differ:

* `CheckResult.passed` is true only for a case that passed: a check that was skipped
  (the engine does not support an op) checked nothing. `RunReport.passed` is the
  command line's exit code 0, so there skipped cases pass unless ``strict=True``
  (`nothing_checked` says when every case was skipped), and a run that found or
  selected no case does not pass (exit code 5; `nothing_found` says why).
* Defaults are the command line's, and so is the config file (``[tool.gradcheck]`` of
  the nearest pyproject.toml, or gradcheck.toml): a keyword left at None is the
  config file's, else the default. So the reference cache is on, in
  ``.gradcheck_cache/`` (``cache=False``: none), as it is for `gradcheck run`.
  `fuzz` keeps its own: no cache unless `cache_dir` is given.
* Where the engine runs (`isolate`): an ``--engine`` spec other than "builtin" runs in
  worker processes, as on the command line, so a crash, hang or `os._exit` in it is
  that case's error (with `timeout` seconds per case); an engine given as a Python
  object (a class, a factory) runs in the caller's process, since it is the caller's.
  ``isolate="process"`` runs a class in workers too, if it can be imported by name.

Importing `gradcheck` imports nothing heavy; NumPy, the runner and (when a reference
is computed) TensorFlow are imported on the first call.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import CaseFileError, UsageError

if TYPE_CHECKING:
    from .config import Settings
    from .fuzzing import FoundBug, FuzzRun
    from .fuzzing.coverage import Coverage
    from .results import CaseResult, Comparison, Hint, InputResult, RunResult

EngineSpec = str | type | Callable[[], Any]
DEFAULT_NAME = "check"


class InvalidCaseError(CaseFileError):
    """`check` was given a case the loader refuses; the message says what to change.

    `file` and `line` are the call site's (there is no case file), `name` the case's.
    """

    def __init__(self, message: str, *, file: str, line: int, name: str) -> None:
        super().__init__(message, line)
        self.file = file
        self.name = name


# -- results ---------------------------------------------------------------------------


class _View:
    """A result object's fields, reached through the view (`_target`), plus what it adds."""

    __slots__ = ()

    def _target(self) -> Any:
        raise NotImplementedError

    def __getattr__(self, field: str) -> Any:
        # Only what the view lacks gets here; its own slots never (copy and pickle probe them).
        if field.startswith("_") or field in type(self).__slots__:
            raise AttributeError(field)
        return getattr(self._target(), field)


class InputCheck(_View):
    """How one differentiated input (or binding) compared: its `name`, `hints`, `passed`
    and every field of its `Comparison` (`status`, `reference_shape`, `engine_shape`,
    `max_abs_diff`, `max_rel_diff`, `mismatched`, `size`, `worst_index`, and the
    `reference` and `engine` arrays in float64)."""

    __slots__ = ("result",)

    def __init__(self, result: InputResult) -> None:
        self.result = result

    @property
    def name(self) -> str:
        return self.result.name

    @property
    def hints(self) -> list[Hint]:
        return self.result.hints

    def _target(self) -> Comparison:
        return self.result.comparison

    def __repr__(self) -> str:
        return (
            f"<InputCheck {self.name}: {self.status}, max_abs_diff={self.max_abs_diff}, "
            f"mismatched={self.mismatched}/{self.size}>"
        )


class CheckResult(_View):
    """One case's outcome: every field of the `CaseResult` the reporters read (`.case`:
    `status`, `name`, `expr`, `location`, `message`, `hints` strongest first, `forward`,
    `nodes`, `traceback`, `duration_s`), with `inputs` by name and `passed`.

    ``str(result)`` is the plain-text report of the case, as `gradcheck run` prints it.
    """

    __slots__ = ("case",)

    def __init__(self, case: CaseResult) -> None:
        self.case = case

    @property
    def passed(self) -> bool:
        """True only when the case ran and every comparison passed (not when skipped)."""
        return self.case.status == "passed"

    @property
    def inputs(self) -> dict[str, InputCheck]:
        """Each compared input's result, by name, in `wrt` order."""
        return {i.name: InputCheck(i) for i in self.case.inputs}

    def _target(self) -> CaseResult:
        return self.case

    def __str__(self) -> str:
        from .report import plain_text

        return plain_text(self.case)

    def __repr__(self) -> str:
        top = f" ({self.case.hints[0].code})" if self.case.hints else ""
        return f"<CheckResult {self.case.name}: {self.case.status}{top}>"


class RunReport(_View):
    """A whole run: every field of the `RunResult` the reporters read (`.run`:
    `exit_code`, `summary`, `engine`, `reference`, `duration_s`), with `cases` as
    `CheckResult`s and `passed` (what `gradcheck run` would exit 0 for: every case
    passed or was skipped).

    ``str(report)`` is every case's plain-text report followed by the summary line.
    """

    __slots__ = ("run",)

    def __init__(self, run: RunResult) -> None:
        self.run = run

    @property
    def passed(self) -> bool:
        return self.run.exit_code == 0

    @property
    def cases(self) -> list[CheckResult]:
        return [CheckResult(c) for c in self.run.cases]

    def _target(self) -> RunResult:
        return self.run

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.run.cases)

    def __str__(self) -> str:
        from .report import plain_text, summary_line

        return "".join(plain_text(c) for c in self.run.cases) + summary_line(self.run) + "\n"

    def __repr__(self) -> str:
        from .report import summary_line

        return f"<RunReport {summary_line(self.run)}>"


class FoundCase(_View):
    """A bug `fuzz` found: the `code` and `op` of its top hint, its smallest case as a case
    file (`yaml`; `path` when written), that case checked as written (`result`, a
    `CheckResult`), whether that check failed the same way (`reproduced`), and how it was
    found (`finding`: `after_examples`, `shrink_steps`, ...)."""

    __slots__ = ("bug",)

    def __init__(self, bug: FoundBug) -> None:
        self.bug = bug

    @property
    def code(self) -> str:
        return self.bug.key[0]

    @property
    def op(self) -> str | None:
        return self.bug.key[1]

    @property
    def yaml(self) -> str:
        return self.bug.text

    @property
    def result(self) -> CheckResult:
        return CheckResult(self.bug.result)

    def _target(self) -> FoundBug:
        return self.bug

    def __str__(self) -> str:
        return f"{self.result}case file:\n{self.yaml}"

    def __repr__(self) -> str:
        from .fuzzing.search import describe

        return f"<FoundCase {describe(self.bug.key)}>"


class FuzzReport(_View):
    """A fuzz run: the found `cases` (`FoundCase`s; also by iterating the report), `passed`
    (none found), `examples` tried, `coverage` per op, and every field of the run
    (`seed`, `ops`, `engine`, `reference`, `search` with the counts).

    ``str(report)`` is each found case's plain-text report and case file, then the summary.
    """

    __slots__ = ("run",)

    def __init__(self, run: FuzzRun) -> None:
        self.run = run

    @property
    def passed(self) -> bool:
        return not self.run.bugs

    @property
    def cases(self) -> list[FoundCase]:
        return [FoundCase(bug) for bug in self.run.bugs]

    @property
    def examples(self) -> int:
        return self.run.search.examples

    @property
    def coverage(self) -> Coverage:
        return self.run.search.coverage

    def _target(self) -> FuzzRun:
        return self.run

    def __iter__(self) -> Iterator[FoundCase]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.run.bugs)

    def __str__(self) -> str:
        from .fuzzing.report import summary_line

        return "".join(f"{case}\n" for case in self.cases) + summary_line(self.run) + "\n"

    def __repr__(self) -> str:
        from .fuzzing.report import summary_line

        return f"<FuzzReport {summary_line(self.run)}>"


# -- the calls -------------------------------------------------------------------------


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
    from .cases.loader import load_case
    from .cases.model import InvalidCase
    from .ops.user import load_ops_files
    from .runner import check_case

    given = dict(engine=engine, max_elements=max_elements, stale_check_limit=stale_check_limit,
                 cache=cache, cache_dir=cache_dir, ops=ops, timeout=timeout)  # fmt: skip
    settings = _settings(given)
    load_ops_files(list(settings.ops))
    file, line = _caller()
    data = {"name": DEFAULT_NAME, **case_options, "expr": expr, "inputs": _input_values(inputs)}
    item = load_case(data, file=file, line=line, max_elements=settings.max_elements)
    if isinstance(item, InvalidCase):
        raise InvalidCaseError(item.message, file=file, line=item.line, name=item.name)
    engine, origin = _chosen_engine(engine, settings)
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
    from .cases import collect
    from .modes import run_defaults
    from .ops.user import load_ops_files
    from .runner import run as run_cases

    if diagnose not in (True, False, "first", "all"):
        raise UsageError(f"diagnose must be True, False, 'first' or 'all', not {diagnose!r}")
    modes, order = run_defaults(modes, order)
    given = dict(paths=paths, engine=engine, rtol=rtol, atol=atol, max_elements=max_elements,
                 stale_check_limit=stale_check_limit, cache=cache, cache_dir=cache_dir,
                 reference=reference, ops=ops, timeout=timeout)  # fmt: skip
    settings = _settings(given)
    load_ops_files(list(settings.ops))
    items = collect(
        list(settings.paths),
        keyword=keyword,
        max_elements=settings.max_elements,
        rtol=settings.rtol,
        atol=settings.atol,
    )
    engine, origin = _chosen_engine(engine, settings)
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
    engine: EngineSpec = "builtin",
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
) -> FuzzReport:
    """`gradcheck fuzz` from Python: generate cases over the ops `engine` has (or `ops`),
    and shrink each bug found to its smallest case.

    The options are the command line's (`time` is ``--time``, `max_bugs=1` is ``-x``),
    with two differences for tests: 200 examples by default, and seed 0, so that a test
    is the same on every run (pass another seed to look elsewhere). Case files are
    written only to `out`.
    """
    from .config import reference_cache
    from .fuzzing import Budget, fuzz_engine
    from .runner import RunOptions

    run = fuzz_engine(
        _factory(engine),
        ops=ops,
        dtypes=dtypes,
        max_ops=max_ops,
        max_rank=max_rank,
        budget=Budget(max_examples, time, max_bugs),
        seed=seed,
        out=None if out is None else Path(out),
        engine_spec=_engine_spec(engine),
        options=RunOptions(cache=reference_cache(cache_dir)),  # the engine runs here
    )
    return FuzzReport(run)


# -- helpers ---------------------------------------------------------------------------


def _settings(given: dict[str, Any]) -> Settings:
    """The call's settings: the keywords `given`, else the config file's, else the
    defaults (an engine given as a Python object is the caller's, not a setting)."""
    from .config import settings

    spec = given.get("engine")
    return settings({**given, "engine": spec if isinstance(spec, str) else None}, _keyword)


def _keyword(key: str) -> str:
    return f"{key}="


def _chosen_engine(engine: EngineSpec | None, settings: Settings) -> tuple[Any, str]:
    """The engine a call runs, and where it was set: a spec is a setting (the keyword's,
    else the config file's, else builtin); an engine object is the caller's (`engine=`)."""
    if engine is None or isinstance(engine, str):
        return settings.engine, settings.source("engine")
    return _engine(engine), _keyword("engine")


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


def _factory(engine: EngineSpec) -> Callable[[], Any]:
    """The engine as a factory in this process (`fuzz` runs it here)."""
    checked = _engine(engine)
    if isinstance(checked, str):
        from .engines.adapters import load_engine

        return load_engine(checked)
    return checked


def _engine(engine: EngineSpec) -> str | Callable[[], Any]:
    """A spec as it is (the runner loads it where the engine runs), or a checked factory."""
    if isinstance(engine, str):
        return engine
    from .engines.protocol import missing_methods

    if inspect.isclass(engine):
        for method in missing_methods(engine):
            raise UsageError(
                f"engine {engine.__name__} has no {method}() method; an engine needs "
                "leaf, value and grad (or vjp, if functional), and one method per op it supports"
            )
        return engine
    if callable(engine) and missing_methods(engine):
        return engine
    raise UsageError(
        f"engine must be 'builtin', an --engine spec ('path/file.py:Class' or "
        f"'package.module:Class'), an engine class or a zero-argument factory, not "
        f"{type(engine).__name__}"
        + ("" if missing_methods(engine) else ": pass the class, every case needs a fresh instance")
    )


def _engine_spec(engine: EngineSpec) -> str | None:
    """How a case file's reproduce command names `engine`: its spec, or for a class the
    file it is defined in; None for the builtin engine (or a factory: no file to name)."""
    if isinstance(engine, str):
        return None if engine == "builtin" else engine
    try:
        file = inspect.getsourcefile(engine) if inspect.isclass(engine) else None
    except TypeError:  # a class defined in C, or in no file
        file = None
    return f"{_relative(file)}:{engine.__name__}" if file else None


def _relative(file: str) -> str:
    """`file` relative to the working folder when it is inside it."""
    try:
        return str(Path(file).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return file


def _caller() -> tuple[str, int]:
    """The file and line that called the API (outside this module), for reports and errors."""
    frame = inspect.currentframe()
    here = frame.f_code.co_filename if frame else __file__
    while frame is not None and frame.f_code.co_filename == here:
        frame = frame.f_back
    if frame is None:
        return "<python>", 1
    return _relative(frame.f_code.co_filename), frame.f_lineno
