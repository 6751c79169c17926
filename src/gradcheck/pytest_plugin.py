"""gradcheck as a pytest plugin: every case of a case file is a test item.

Opt-in, so that it never takes over YAML that is not a case file::

    pytest --gradcheck cases/                       # the YAML under cases/
    pytest --gradcheck cases/seed.yaml::seed_batched_matmul_chain
    pytest --gradcheck cases/ --gradcheck-engine examples/seed_engine.py -n 2

or, in the ini file (``[tool.pytest.ini_options]`` in pyproject.toml)::

    gradcheck_paths = ["cases"]                     # `pytest` alone now runs them too
    gradcheck_engine = "mypkg.autodiff:Engine"      # default: builtin
    gradcheck_cache_dir = "refs"                    # default: .gradcheck_cache
    gradcheck_ops = ["my_ops.py"]                   # user-defined ops (--gradcheck-ops)
    gradcheck_reference = "numeric"                 # tensorflow (default), numeric or both

Settings come from pytest's options (paths relative to where pytest started), else the
ini options (relative to the ini file), else gradcheck's config file (``[tool.gradcheck]``
or ``gradcheck.toml``, relative to it: see `gradcheck.config`), else the defaults
`gradcheck run` has: the same `config.Settings`. The reference cache is on unless
``--gradcheck-no-cache`` (or ``cache = false`` in the config file).

Which YAML files are case files (``*.yaml``/``*.yml``, hidden files left out):

* those under a ``gradcheck_paths`` entry, whenever the ini option is set;
* with ``--gradcheck``, also those under the paths given on the command line; with no
  paths given and no ``gradcheck_paths``, those under the config file's ``paths``, else
  ``<rootdir>/cases`` (the folder ``gradcheck run`` reads by default).

When pytest runs without paths on its command line (so ``testpaths`` apply), the case
folders are collected as well as ``testpaths``. Without ``--gradcheck`` and without
``gradcheck_paths`` the plugin collects nothing: a project's own ``pytest`` run is
unchanged. ``-p no:gradcheck`` unloads it altogether.

Each case is an item ``path/file.yaml::case_name``; its tags are ``-k`` keywords. A
failing case fails with gradcheck's plain-text report, its best explanation (top hint
and fix) first; an engine error fails the same way; a case the engine does not support
is skipped with the reason (``--gradcheck-strict``: it fails); a session whose every
case was skipped says, after its summary, that nothing was checked. The stale-gradients
check has ``gradcheck run``'s size limit (``--gradcheck-stale-check-limit N``). As with
``gradcheck run``, an engine other than the builtin one runs in a worker process kept
for the session (``--gradcheck-isolate process|none``), so its crash, hang or exit
fails that item only; ``--gradcheck-timeout S`` bounds each case (default 60 s).

``--gradcheck-fuzz N`` (or ``gradcheck_fuzz = N`` in the ini file) adds one more item,
``gradcheck-fuzz``: ``gradcheck fuzz`` of the same engine over N examples (seed 0, or
``--gradcheck-fuzz-seed``; ops from ``gradcheck_fuzz_ops``, default every op the engine
has). It fails with each bug found, its diagnosis and its smallest case as a case file to
paste into the case folder (``--gradcheck-fuzz-out DIR`` also writes them there). It
needs no case file, and ``-k fuzz`` selects or deselects it like any item.

A case file with any problem is a collection error listing every problem as
``file:line: message``, as a Python test module with a syntax error is: pytest stops
before running anything unless ``--continue-on-collection-errors`` is given. Collection
is deterministic, so pytest-xdist workers agree on the items.

Nothing heavy is imported until it is needed: the case loader (NumPy) when a case file
is collected, the engine and TensorFlow when the first item runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .defaults import TIMEOUT
from .errors import GradcheckError

if TYPE_CHECKING:
    from .cases import Case
    from .config import Settings
    from .engines.protocol import EngineFactory
    from .fuzzing import FuzzRun
    from .results import CaseResult
    from .runner import RunOptions

SUFFIXES = (".yaml", ".yml")
DEFAULT_ENGINE = "builtin"
FUZZ_ITEM = "gradcheck-fuzz"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck", "gradcheck: autodiff gradients against TensorFlow")
    group.addoption(
        "--gradcheck",
        action="store_true",
        default=False,
        help="collect gradcheck case files (*.yaml/*.yml) under the given paths "
        "(default: gradcheck_paths, else cases/), one test per case.",
    )
    group.addoption(
        "--gradcheck-engine",
        metavar="SPEC",
        default=None,
        help="engine to check: builtin, torch, jax, autograd, tensorflow, "
        "path/file.py[:Class] or pkg.module[:Class] "
        "(default: the gradcheck_engine ini option, else builtin).",
    )
    group.addoption(
        "--gradcheck-strict",
        action="store_true",
        default=False,
        help="a case the engine does not support fails instead of being skipped.",
    )
    group.addoption(
        "--gradcheck-stale-check-limit",
        metavar="N",
        type=int,
        default=None,
        help="ask the engine twice (the stale-gradients check) only in cases with at most "
        "N input elements (as gradcheck run --stale-check-limit; 0: every case; "
        "default: 1,000,000).",
    )
    group.addoption(
        "--gradcheck-ops",
        metavar="FILE",
        action="append",
        default=[],
        help="a Python file declaring user-defined ops (as gradcheck run --ops); repeatable.",
    )
    group.addoption(
        "--gradcheck-reference",
        choices=("tensorflow", "numeric", "both"),
        default=None,
        help="what gradients are checked against (as gradcheck run --reference; default: "
        "the gradcheck_reference ini option, else tensorflow).",
    )
    group.addoption(
        "--gradcheck-isolate",
        choices=("process", "none"),
        default=None,
        help="where the engine runs: process (a worker kept for the session) or none "
        "(pytest's own process, for pdb); default: process, none for the builtin engine.",
    )
    group.addoption(
        "--gradcheck-timeout",
        metavar="S",
        type=float,
        default=None,
        help=f"seconds the engine may take on one case in its worker (default: {TIMEOUT:g}).",
    )
    group.addoption(
        "--gradcheck-cache-dir",
        metavar="DIR",
        default=None,
        help="reuse TensorFlow's reference results kept in DIR between runs "
        "(as gradcheck run --cache-dir; default: the gradcheck_cache_dir ini option, "
        "else .gradcheck_cache in the rootdir).",
    )
    group.addoption(
        "--gradcheck-no-cache",
        action="store_true",
        default=False,
        help="no reference cache: compute every reference (as gradcheck run --no-cache).",
    )
    group.addoption(
        "--gradcheck-fuzz",
        metavar="N",
        type=int,
        default=None,
        help="add a gradcheck-fuzz item: fuzz the engine over N generated examples "
        "(default: the gradcheck_fuzz ini option, else no fuzzing).",
    )
    group.addoption(
        "--gradcheck-fuzz-seed",
        metavar="SEED",
        type=int,
        default=0,
        help="seed of the gradcheck-fuzz item (default: 0, the same examples every run).",
    )
    group.addoption(
        "--gradcheck-fuzz-out",
        metavar="DIR",
        default=None,
        help="write the case file of each bug the gradcheck-fuzz item finds into DIR.",
    )
    parser.addini(
        "gradcheck_fuzz",
        type="string",
        default="0",
        help="examples for the gradcheck-fuzz item (0: no such item).",
    )
    parser.addini(
        "gradcheck_fuzz_ops",
        type="args",
        default=[],
        help="ops the gradcheck-fuzz item generates cases over (default: every op the engine has).",
    )
    parser.addini(
        "gradcheck_paths",
        type="paths",
        default=[],
        help="gradcheck case files or folders; setting it turns the gradcheck plugin on.",
    )
    parser.addini(
        "gradcheck_engine",
        type="string",
        default="",
        help="engine the gradcheck plugin checks (--gradcheck-engine overrides it).",
    )
    parser.addini(
        "gradcheck_ops",
        type="paths",
        default=[],
        help="Python files declaring user-defined ops, loaded before case files are read.",
    )
    parser.addini(
        "gradcheck_reference",
        type="string",
        default="",
        help="tensorflow, numeric or both (--gradcheck-reference overrides it).",
    )
    parser.addini(
        "gradcheck_cache_dir",
        type="string",
        default="",
        help="folder for gradcheck's reference cache, relative to the ini file.",
    )


# --- which files, which engine ---------------------------------------------------------


@dataclass
class _State:
    """What one pytest session's gradcheck settings resolve to."""

    roots: list[Path]
    settings: Settings
    strict: bool = False
    fuzz_examples: int = 0  # 0: no gradcheck-fuzz item
    fuzz_seed: int = 0
    fuzz_ops: list[str] | None = None
    fuzz_out: Path | None = None
    isolate: str | None = None
    _engine: Any = field(default=None, repr=False)  # the factory, or the UsageError (fuzz)
    _checker: Any = field(default=None, repr=False)  # the Checker, or EngineUnavailable

    @property
    def engine_spec(self) -> str:
        return self.settings.engine

    def covers(self, path: Path) -> bool:
        path = _absolute(path)
        return any(path == root or root in path.parents for root in self.roots)

    def engine(self) -> EngineFactory:
        """The engine factory, loaded in this process once per session (the fuzz item's)."""
        if self._engine is None:
            from .engines.adapters import load_engine

            try:
                self._engine = load_engine(self.engine_spec, self.settings.engine_named())
            except GradcheckError as e:
                self._engine = EngineUnavailable(f"gradcheck: {e}")
        if isinstance(self._engine, EngineUnavailable):
            raise self._engine
        return self._engine

    def check(self, case: Case) -> CaseResult:
        """Check `case` with the session's engine, loaded (or its workers started) at the
        first item that runs; every item fails with the same message if it cannot be."""

        if isinstance(self._checker, EngineUnavailable):
            raise self._checker
        try:
            if self._checker is None:
                from .runner import Checker

                self._checker = Checker(self.engine_spec, self.options)
            return self._checker.check(case)
        except GradcheckError as e:
            self.close()
            self._checker = EngineUnavailable(f"gradcheck: {e}")
            raise self._checker from None

    def close(self) -> None:
        if self._checker is not None and not isinstance(self._checker, EngineUnavailable):
            self._checker.close()
            self._checker = None

    @cached_property
    def options(self) -> RunOptions:
        """Made once per session: one reference cache, so one warning at most."""
        return self.settings.run_options(self.engine_spec, strict=self.strict, isolate=self.isolate)


_STATE = pytest.StashKey[_State]()


def pytest_configure(config: pytest.Config) -> None:
    from .config import DEFAULTS

    invocation_dir = config.invocation_params.dir
    explicit = config.args_source == pytest.Config.ArgsSource.ARGS
    ini_paths = [_absolute(Path(p)) for p in config.getini("gradcheck_paths")]
    fuzz = config.getoption("gradcheck_fuzz")
    fuzz_examples = int(config.getini("gradcheck_fuzz") or 0) if fuzz is None else fuzz
    on = config.getoption("gradcheck") or bool(ini_paths) or fuzz_examples > 0
    settings = _settings(config, ini_paths) if on else DEFAULTS  # off: no file is read
    roots = list(ini_paths)
    if config.getoption("gradcheck") and explicit:
        roots += [_absolute(invocation_dir / arg.split("::")[0]) for arg in config.args]
    elif config.getoption("gradcheck") and not ini_paths:
        roots += [_absolute(path) for path in settings.paths]  # the config file's, else cases/
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        # No paths on the command line: the case folders join `testpaths`.
        args = [_absolute(invocation_dir / arg) for arg in config.args]
        for root in roots:
            if root.exists() and not any(root == a or a in root.parents for a in args):
                config.args.append(str(root))
                args.append(root)
    if on and settings.ops:
        _load_ops(list(settings.ops))
    fuzz_out = config.getoption("gradcheck_fuzz_out")
    config.stash[_STATE] = _State(
        roots=roots,
        settings=settings,
        strict=config.getoption("gradcheck_strict"),
        fuzz_examples=fuzz_examples,
        fuzz_seed=config.getoption("gradcheck_fuzz_seed"),
        fuzz_ops=config.getini("gradcheck_fuzz_ops") or None,
        fuzz_out=invocation_dir / fuzz_out if fuzz_out else None,
        isolate=config.getoption("gradcheck_isolate"),
    )


def _settings(config: pytest.Config, ini_paths: list[Path]) -> Settings:
    """The session's settings: pytest's options (relative to where pytest was started),
    else the ini file's (relative to it), else the gradcheck config file's, else the
    defaults (paths in the config file's folder, else in the rootdir)."""
    from .config import Layer, config_layer, defaults_at, resolve

    here = config.invocation_params.dir
    options = {key: config.getoption(f"gradcheck_{key}") for key in _OPTIONS}
    options["ops"] = options["ops"] or None
    options["cache"] = False if config.getoption("gradcheck_no_cache") else None
    ini = {key: config.getini(f"gradcheck_{key}") or None for key in _INI}
    ini["paths"] = ini_paths or None
    inipath = config.inipath
    ini_name = inipath.name if inipath else "the ini file"
    found = config_layer(here)
    try:
        return resolve(
            Layer(options, lambda key: f"--gradcheck-{key.replace('_', '-')}", here),
            Layer(ini, lambda key: f"gradcheck_{key} in {ini_name}", inipath and inipath.parent),
            found,
            defaults_at(found.base if found else config.rootpath),
        )
    except GradcheckError as e:
        raise pytest.UsageError(f"gradcheck: {e}") from None


# The settings pytest's options and ini file can set (pytest's own names, prefixed).
_OPTIONS = ("engine", "stale_check_limit", "ops", "reference", "timeout", "cache_dir")
_INI = ("engine", "ops", "reference", "cache_dir")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()  # the session's worker processes


def _load_ops(paths: list[Path]) -> None:
    from .ops.user import load_ops_files

    try:
        load_ops_files(paths)
    except GradcheckError as e:
        message = str(e).replace("--ops", "--gradcheck-ops", 1)
        raise pytest.UsageError(f"gradcheck: {message}") from None


def pytest_report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(_STATE, None)
    if state is None or not (state.roots or state.fuzz_examples):
        return None
    where = ", ".join(_display(root, config.rootpath) for root in state.roots)
    files = f", case files under {where}" if state.roots else ""
    fuzz = f", fuzz {state.fuzz_examples} examples" if state.fuzz_examples else ""
    from .config import origin_note

    origin = origin_note(state.settings.source("engine"))
    return f"gradcheck: engine {state.engine_spec} {origin}{files}{fuzz}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """As `gradcheck run` (SPEC §5): a session whose every case was skipped (the engine
    lacks their ops) passes, and says that nothing was checked. (pytest itself exits 5
    when nothing was collected or selected, and 4 for a malformed -k.)"""
    if terminalreporter.config.stash.get(_STATE, None) is None:
        return
    cases = [
        report
        for reports in terminalreporter.stats.values()
        for report in reports
        if isinstance(report, pytest.TestReport) and _is_case(report.nodeid)
    ]
    ran = [r for r in cases if r.when == "call" or r.skipped]
    if ran and all(r.skipped for r in ran):
        every = "the case was" if len(ran) == 1 else f"all {len(ran)} cases were"
        terminalreporter.write_line(f"gradcheck: nothing was checked: {every} skipped", yellow=True)


def _is_case(nodeid: str) -> bool:
    path = nodeid.split("::")[0]
    return path.endswith(SUFFIXES) and "::" in nodeid


@pytest.hookimpl(tryfirst=True)  # before pytest's own -k/-m selection, which then applies
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None and state.fuzz_examples > 0:
        items.append(FuzzItem.from_parent(session, name=FUZZ_ITEM, nodeid=FUZZ_ITEM))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> CaseFile | None:
    state = parent.config.stash.get(_STATE, None)
    if (
        state is None
        or not state.roots
        or file_path.suffix not in SUFFIXES
        or file_path.name.startswith(".")
        or not state.covers(file_path)
    ):
        return None
    return CaseFile.from_parent(parent, path=file_path)


# --- collection ----------------------------------------------------------------------


class InvalidCaseFile(pytest.Collector.CollectError):
    """A case file with problems; the message lists each as `file:line: message`."""


class CaseFile(pytest.File):
    """One case file: an item per case, or a collection error naming every problem."""

    def collect(self) -> Iterator[CaseItem]:
        from .cases import Case, load_file

        shown = self.nodeid.split("::")[0] or self.path.name  # rootdir-relative, as node ids
        try:
            items = load_file(self.path)
        except GradcheckError as e:
            raise InvalidCaseFile(f"{shown}: {e}") from None
        problems = [
            f"{shown}:{line}: {message}"
            for item in items
            if not isinstance(item, Case)
            for line, message in item.problems or [(item.line, item.message)]
        ]
        if problems:
            raise InvalidCaseFile("\n".join(problems))
        for case in items:
            assert isinstance(case, Case)
            case.file = shown  # reports name the file as pytest does, not by absolute path
            yield CaseItem.from_parent(self, name=case.name, case=case)


class CaseFailed(Exception):
    """A case that failed or whose engine raised; carries gradcheck's result."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.message or result.status)
        self.result = result


class EngineUnavailable(Exception):
    """`--gradcheck-engine` names no usable engine: every item fails with this message."""


class CaseItem(pytest.Item):
    """One case: checked against TensorFlow when it runs."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.result: CaseResult | None = None
        self.extra_keyword_matches.update(case.tags)  # `-k matmul` selects by tag too

    def runtest(self) -> None:
        state = self.config.stash[_STATE]
        self.result = result = state.check(self.case)
        if result.status == "skipped":
            _skip(result.message or "skipped")
        if result.status != "passed":
            raise CaseFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            brief = self.config.getoption("tbstyle", "auto") == "line"
            return _failure_repr(excinfo.value.result, brief=brief)
        if isinstance(excinfo.value, EngineUnavailable):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"gradcheck: {self.name}"


class FuzzFound(Exception):
    """The gradcheck-fuzz item found bugs; carries the run."""

    def __init__(self, run: FuzzRun) -> None:
        super().__init__(f"{len(run.bugs)} bugs")
        self.run = run


class FuzzItem(pytest.Item):
    """`gradcheck fuzz` of the session's engine, as one test."""

    def runtest(self) -> None:
        from .fuzzing import Budget, fuzz_engine

        state = self.config.stash[_STATE]
        run = fuzz_engine(
            state.engine(),
            ops=state.fuzz_ops,
            budget=Budget(state.fuzz_examples),
            seed=state.fuzz_seed,
            out=state.fuzz_out,
            engine_spec=state.engine_spec if state.engine_spec != DEFAULT_ENGINE else None,
            options=state.options,
        )
        if run.bugs:
            raise FuzzFound(run)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> Any:
        if isinstance(excinfo.value, FuzzFound):
            return fuzz_failure_text(excinfo.value.run)
        if isinstance(excinfo.value, EngineUnavailable):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.config.rootpath, None, FUZZ_ITEM


def fuzz_failure_text(run: FuzzRun) -> str:
    """Each bug the fuzz item found, best explanation first, then its case file."""
    from .fuzzing.report import summary_line
    from .fuzzing.search import describe

    found = ", ".join(describe(bug.key) for bug in run.bugs)
    blocks = [f"gradcheck fuzz found {found}"]
    for bug in run.bugs:
        where = f"written to {bug.path}" if bug.path else "to add to your case files"
        blocks.append(f"{failure_text(bug.result)}\ncase file ({where}):\n{bug.text}")
    return "\n\n".join([*blocks, summary_line(run)])


def failure_text(result: CaseResult) -> str:
    """Why a case did not pass, best explanation first, then gradcheck's plain report.

    The first line is the headline (top hint, else the message): pytest's short test
    summary (``-ra``) and JUnit messages show it.
    """
    from .report import headline, plain_text

    lines = [headline(result)]
    if result.hints:
        lines.append(f"fix: {result.hints[0].fix}")
    return "\n".join(lines) + "\n\n" + plain_text(result)


def _failure_repr(result: CaseResult, *, brief: bool = False) -> Any:
    """`failure_text`, with the headline as the "crash" message pytest shows on one line.

    A plain string would do, but then pytest's short summary on CI (and with ``-vv``)
    repeats the whole report, and ``--tb=line`` shows its first 50 characters. This is
    the shape pytest's own ``--tb=native`` gives, so pytest-xdist carries it intact.
    `brief` (``--tb=line``): the headline at the case's line, nothing more.
    """
    from .report import headline

    text = failure_text(result)
    try:
        from _pytest._code.code import ReprExceptionInfo, ReprFileLocation, ReprTracebackNative

        return ReprExceptionInfo(
            reprtraceback=ReprTracebackNative([] if brief else text.splitlines(keepends=True)),
            reprcrash=ReprFileLocation(result.file, result.line, headline(result)),
        )
    except Exception:  # pytest's internals moved: the plain string is still the report
        return text


def _skip(reason: str) -> None:
    # Located at the case (`cases/x.yaml:12: unsupported: ...` in `-rs`), not at this line.
    try:
        skipped = pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:  # a pytest without the keyword: the location is this file's
        skipped = pytest.skip.Exception(reason)
    raise skipped


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _display(path: Path, rootpath: Path) -> str:
    try:
        return path.relative_to(rootpath).as_posix() or "."
    except ValueError:
        return str(path)
