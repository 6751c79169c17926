"""What the API's calls return: views over the results the reporters read, each adding
what a test asserts on (`passed`, inputs by name, the found cases), and printing as the
plain-text report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..fuzzing import FoundBug, FuzzRun
    from ..fuzzing.coverage import Coverage
    from ..results import CaseResult, Comparison, Hint, InputResult, RunResult


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
        from ..report import plain_text

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
        from ..report import plain_text, summary_line

        return "".join(plain_text(c) for c in self.run.cases) + summary_line(self.run) + "\n"

    def __repr__(self) -> str:
        from ..report import summary_line

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
        from ..fuzzing.search import describe

        return f"<FoundCase {describe(self.bug.key)}>"


class FuzzReport(_View):
    """A fuzz run: the found `cases` (`FoundCase`s; also by iterating the report), `passed`
    (none found), `examples` tried, `coverage` per op, and every field of the run
    (`seed`, `ops`, `engine`, `engine_origin`, `reference`, `search` with the counts).

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
        from ..fuzzing.report import summary_line

        return "".join(f"{case}\n" for case in self.cases) + summary_line(self.run) + "\n"

    def __repr__(self) -> str:
        from ..fuzzing.report import summary_line

        return f"<FuzzReport {summary_line(self.run)}>"
