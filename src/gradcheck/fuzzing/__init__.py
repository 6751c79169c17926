"""``gradcheck fuzz``: find an engine's gradient bugs without a case file (SPEC §10).

The pipeline, a module per step:

* `generate` grows random, well-typed cases over the op registry as Hypothesis
  strategies: `proposals` reads the ways arguments and attributes may meet off the
  ops' shape rules, `program` writes a case as text, `domain` keeps each op inside the
  domain the registry declares for it and away from its kinks;
* `search` runs rounds of `hypothesis.find`: check each case (builtin engine first,
  TensorFlow and the diagnosis only where they differ), and shrink each new bug (by
  top hint and op) to its smallest case;
* `output` writes each bug as an ordinary case file; `coverage` says what the run
  exercised, op by op; `report` prints it all, for people or as JSON.

`fuzz_engine` is the one entry point; the command line, the Python API
(`gradcheck.fuzz`) and the pytest plugin all call it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..cases.loader import load_case, load_file
from ..cases.model import Case
from ..diagnosis.run.report_card import coverage as engine_coverage
from ..engines.driver import EngineFailure, call_engine
from ..engines.loading import engine_name
from ..engines.protocol import EngineFactory
from ..errors import UsageError
from ..ops import all_ops, has_op
from ..references.numeric import LABEL as NUMERIC_LABEL
from ..references.tensorflow import reference_label
from ..results import CaseResult
from ..runner import RunOptions, check_case
from . import search
from .generate import DEFAULT_DTYPES, DEFAULT_MAX_OPS, DEFAULT_MAX_RANK, Space
from .output import (
    FIRST_CASE_LINE,
    case_data,
    case_file_text,
    reproduce_options,
    write_case_file,
)
from .search import Budget, BugKey, Finding, Progress, SearchResult, bug_key

__all__ = [
    "Budget", "FoundBug", "FuzzRun", "Progress", "Supported", "fuzz_engine", "supported_ops"
]  # fmt: skip


@dataclass
class FoundBug:
    """A bug, its smallest case as a case file, and that case checked again as written."""

    finding: Finding
    text: str  # the case file
    path: Path | None  # where it was written, if it was
    result: CaseResult  # the written case checked as `gradcheck run` checks it
    reproduced: bool  # that check fails the same way (same top hint code and op)
    unwritten: str | None = None  # why --out could not take it (the disk full): printed instead

    @property
    def key(self) -> BugKey:
        return self.finding.key


@dataclass
class FuzzRun:
    engine: str
    reference: str
    seed: int
    ops: tuple[str, ...]
    search: SearchResult
    bugs: list[FoundBug]
    engine_origin: str | None = None  # where the engine was set, as `RunResult.engine_origin`
    config: str | None = None  # the config file read, as `RunResult.config`
    not_implemented: tuple[str, ...] = ()  # stubs raising NotImplementedError, left out

    @property
    def exit_code(self) -> int:
        """SPEC §10: 1 when a bug was found, 0 when none was in the budget."""
        return 1 if self.bugs else 0


@dataclass(frozen=True)
class Supported:
    """What a fuzz run generates from, and the engine's stubs (SPEC §10: methods whose body
    only raises NotImplementedError, as init-engine writes them), left out and listed."""

    ops: tuple[str, ...]
    stubs: tuple[str, ...] = ()


def supported_ops(
    factory: EngineFactory, only: Sequence[str] | None = None, reference: str = "tensorflow"
) -> Supported:
    """The registry's ops the engine implements (a method that is no stub) and the
    reference can judge (a user op without a TensorFlow builder needs the numeric
    reference); those of `only`, which must be such ops."""
    try:
        engine = call_engine("creating the engine", factory)
    except EngineFailure as failure:
        raise UsageError(f"cannot fuzz: {failure.message}") from None
    # engine_coverage, not coverage: the submodule fuzzing.coverage takes that name here.
    stubs = engine_coverage(engine, list(all_ops())).stubs
    # An op whose first parameter is integer (one_hot) cannot take the float value a
    # program grows from; its output is a constant anyway, with nothing to check.
    implemented = [
        op.name
        for op in all_ops()
        if callable(getattr(engine, op.name, None))
        and op.name not in stubs
        and (op.tf or reference == "numeric")
        and op.params[0] not in op.integer
    ]
    if only is None:
        if not implemented:
            raise UsageError("the engine has a method for none of gradcheck's ops")
        return Supported(tuple(implemented), tuple(stubs))
    unknown = [name for name in only if not has_op(name)]
    if unknown:
        raise UsageError(f"unknown op {unknown[0]!r} in --ops (see `gradcheck ops`)")
    stubbed = [name for name in only if name in stubs]
    if stubbed:
        raise UsageError(
            f"cannot fuzz {', '.join(stubbed)} (asked in --ops): the engine's method only "
            "raises NotImplementedError"
        )
    missing = [name for name in only if name not in implemented]
    if missing:
        raise UsageError(
            f"cannot fuzz {', '.join(missing)} (asked in --ops): the engine has no method for "
            "it, or it declares no TensorFlow builder (then use --reference numeric)"
        )
    if not only:
        raise UsageError("--ops names no op")
    return Supported(tuple(name for name in implemented if name in only))  # registry order


def fuzz_engine(
    factory: EngineFactory,
    *,
    ops: Sequence[str] | None = None,
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    max_ops: int = DEFAULT_MAX_OPS,
    max_rank: int = DEFAULT_MAX_RANK,
    budget: Budget | None = None,
    seed: int = 0,
    out: Path | None = None,
    engine_spec: str | None = None,
    options: RunOptions | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> FuzzRun:
    """Fuzz the engine `factory` makes; write each bug's case to `out` if given.

    `engine_spec` is how the reproduce command in a written file names the engine;
    `options` are the runner's (a reference cache, ...) for every case checked.
    """
    budget = budget or Budget()
    options = options or RunOptions()
    try:
        supported = supported_ops(factory, ops, options.reference)
        conventions = frozenset(getattr(factory, "conventions", None) or ())
        space = Space(supported.ops, tuple(dtypes), max_ops, max_rank, conventions)
    except ValueError as e:
        raise UsageError(str(e)) from None
    found = search.run(
        space, factory, budget=budget, seed=seed, options=options, on_progress=on_progress
    )
    bugs = [_found_bug(f, factory, options, seed, out, engine_spec) for f in found.findings]
    return FuzzRun(
        engine=engine_name(factory),
        reference=_reference_label(options),
        seed=seed,
        ops=space.ops,
        search=found,
        bugs=bugs,
        engine_origin=options.engine_origin,
        config=options.config,
        not_implemented=supported.stubs,
    )


def _reference_label(options: RunOptions) -> str:
    labels = []
    if options.reference in ("tensorflow", "both"):
        labels.append(reference_label(options.cache and options.cache.tensorflow_version))
    if options.reference in ("numeric", "both"):
        labels.append(NUMERIC_LABEL)
    return " + ".join(labels)


def _found_bug(
    finding: Finding,
    factory: EngineFactory,
    options: RunOptions,
    seed: int,
    out: Path | None,
    engine_spec: str | None,
) -> FoundBug:
    """Write the finding's case (if `out`) and check it again as it reads from there; a
    write that fails keeps the finding, its case file printed instead."""
    reproduce = reproduce_options(finding, engine_spec, options.reference)
    path, unwritten = None, None
    if out is not None:
        try:
            path = write_case_file(finding, out, seed=seed, options=reproduce)
        except OSError as e:
            unwritten = f"--out {out}: {e.strerror or e}"
    if path is None:
        shown = f"{case_data(finding)['name']}.yaml"
        text = case_file_text(finding, seed=seed, options=reproduce, path=shown)
        case = load_case(case_data(finding), file="<fuzz>", line=FIRST_CASE_LINE)
    else:
        text = path.read_text(encoding="utf-8")
        (case,) = load_file(path)
    assert isinstance(case, Case), f"a written case does not load: {case}"
    result = check_case(case, factory, options)
    reproduced = bug_key(result, case) == finding.key
    return FoundBug(finding, text, path, result, reproduced, unwritten)
