"""What the plugin collects: a case file's items, one per case (or a collection error
naming every problem of the file), the gradcheck-fuzz item, and how they fail: best
explanation first, then gradcheck's plain report."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import GradcheckError
from .state import STATE, EngineUnavailable

if TYPE_CHECKING:
    from ..cases import Case
    from ..fuzzing import FuzzRun
    from ..results import CaseResult

DEFAULT_ENGINE = "builtin"
FUZZ_ITEM = "gradcheck-fuzz"


class InvalidCaseFile(pytest.Collector.CollectError):
    """A case file with problems; the message lists each as `file:line: message`."""


class CaseFile(pytest.File):
    """One case file: an item per case, or a collection error naming every problem."""

    def collect(self) -> Iterator[CaseItem]:
        from ..cases import Case, load_file

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


class CaseItem(pytest.Item):
    """One case: checked against TensorFlow when it runs."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.result: CaseResult | None = None
        self.extra_keyword_matches.update(case.tags)  # `-k matmul` selects by tag too

    def runtest(self) -> None:
        state = self.config.stash[STATE]
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
        from ..fuzzing import Budget, fuzz_engine

        state = self.config.stash[STATE]
        run = fuzz_engine(
            state.engine(),
            ops=state.fuzz_ops,
            budget=Budget(state.fuzz_examples),
            seed=state.fuzz_seed,
            out=state.fuzz_out,
            engine_spec=state.engine_spec if state.engine_spec != DEFAULT_ENGINE else None,
            # No reference cache, as `gradcheck fuzz` keeps none: fuzzed cases are new on
            # every run and would only fill a cache that may be committed and locked.
            options=replace(state.options, cache=None),
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
    from ..fuzzing.report import summary_line
    from ..fuzzing.search import describe

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
    from ..report import headline, plain_text

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
    from ..report import headline

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
