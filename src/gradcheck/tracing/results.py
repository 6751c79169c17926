"""What `gradcheck.torch.check` and `gradcheck.jax.check` return: the `CheckResult` every
check returns, plus the trace (`program`, `notes`), the reports of every format, and
`save_case` to keep the check as an ordinary case file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..api.results import CheckResult

if TYPE_CHECKING:
    from ..results import RunResult
    from .program import Program


class TracedCheck(CheckResult):
    """A traced function's check (see `CheckResult`): `passed`, `inputs`, `hints`, ...;
    `program` is the expression it was traced into, `notes` what the trace says of itself
    (ops checked as opaque nodes, cuts left out, branches on values); `report(format)` is
    the report in any of `gradcheck run`'s formats, and `save_case(path)` writes the
    check as a case file."""

    __slots__ = ("framework", "options", "program", "run")

    def __init__(
        self, run: RunResult, program: Program, framework: str, options: dict[str, Any]
    ) -> None:
        super().__init__(run.cases[0])
        self.run = run
        self.program = program
        self.framework = framework
        self.options = options  # the case keys the check was given (seed, tolerance, ...)

    @property
    def notes(self) -> list[str]:
        return list(dict.fromkeys(self.program.notes))

    def report(self, format: str = "rich", output: str | os.PathLike[str] | None = None) -> str:
        """The report as `gradcheck run --format FORMAT` writes it (rich: plain text),
        written to `output` too when given."""
        from .. import __version__
        from ..report import plain_text, summary_line, to_github, to_html, to_json, to_junit

        writers = {
            "rich": lambda: plain_text(self.case) + summary_line(self.run) + "\n",
            "json": lambda: to_json(self.run, tool_version=__version__),
            "junit": lambda: to_junit(self.run),
            "github": lambda: to_github(self.run),
            "html": lambda: to_html(self.run, tool_version=__version__),
        }
        if format not in writers:
            raise ValueError(f"format must be one of {', '.join(writers)}, not {format!r}")
        text = writers[format]()
        if output is not None:
            from ..util.atomic import write_report

            write_report(output, text)
        return text

    def save_case(self, path: str | os.PathLike[str]) -> list[Path]:
        """Write the check as a case file at `path` (and, where the trace has opaque nodes,
        an ops file beside it declaring them with the engine that runs them); the files
        written. Their first lines say the command that runs them."""
        from .saving import save_case

        return save_case(self, Path(path))

    def assert_passed(self) -> TracedCheck:
        """Self when it passed; else an ``AssertionError`` led by the top hint, then the
        report (what `assert_gradients` raises in a pytest test)."""
        if self.passed:
            return self
        top = self.case.hints[0] if self.case.hints else None
        lead = f"{top.code}: {top.message}\n  fix: {top.fix}\n\n" if top else ""
        raise AssertionError(f"{self.case.name}: gradients {self.case.status}. {lead}{self}")

    def __repr__(self) -> str:
        top = f" ({self.case.hints[0].code})" if self.case.hints else ""
        return f"<TracedCheck {self.case.name}: {self.case.status}{top}>"
