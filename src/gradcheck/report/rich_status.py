"""The rich report's one-line verdicts: `FAILED  file:line::name  detail` for a case and
`INVALID file:line: problem` for a case-file problem, wrapped at words under the id,
the id never broken (it is made to be copied and grepped); and the two pieces every
block of the report is built from, escaped text and an indent without trailing blanks.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..results import CaseResult
from .text import printable

STATUS_WORD = {
    "passed": "PASSED",
    "failed": "FAILED",
    "error": "ERROR",
    "skipped": "SKIPPED",
    "invalid": "INVALID",
    "not run": "NOT RUN",
}
STATUS_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "error": "bold red",
    "skipped": "yellow",
    "invalid": "bold magenta",
    "not run": "dim",
}
INDENT = 2


def status_line(case: CaseResult, case_id: str, detail: Text, width: int) -> list[RenderableType]:
    """`FAILED  file:line::name  detail`, the id never broken (it is made to be copied and
    grepped), a detail too long for the line wrapped at words under the id."""
    # Pad to the longest word (SKIPPED/INVALID) so the case ids line up.
    word = Text(f"{STATUS_WORD[case.status]:<7}", STATUS_STYLE[case.status])
    line = Text.assemble(word, " ", printable(case_id))
    if detail:
        line.append("  ")
        line.append_text(detail)
    if line.cell_len <= width:
        return [line]
    return _hanging(word, Text(printable(case_id)), detail, width)


def problem_lines(
    location: str, message: str, width: int, word: str = "INVALID"
) -> list[RenderableType]:
    """`INVALID file:line: problem`, a line per problem of the case, wrapped at words."""
    status = {v: k for k, v in STATUS_WORD.items()}[word]
    # Case-file errors usually already start with `file:line:`; don't repeat it.
    if message.startswith(location + ":"):
        message = message[len(location) + 1 :].lstrip()
    word_text = Text(f"{word:<7}", STATUS_STYLE[status])
    return _hanging(word_text, plain(location + ":"), plain(message), width, sep=" ")


def _hanging(
    word: Text, case_id: Text, detail: Text, width: int, sep: str = "  "
) -> list[RenderableType]:
    """The status word, then the id and detail in a column that wraps at words; an id
    too long for that column on a line of its own, unbroken, and the detail under it."""
    column = width - len(word) - 1
    if case_id.cell_len > column:
        # A bare Text: printed with soft_wrap, as a status line is, so never broken.
        return [Text.assemble(word, " ", case_id), indented(detail, 0, len(word) + 1)]
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold", max_width=column)
    grid.add_row(word, Text.assemble(case_id, sep, detail) if detail else case_id)
    return [grid]


def plain(text: str, style: str = "") -> Text:
    """Text from a case file (an expression, a node, a hint quoting one), escaped."""
    return Text(printable(text), style=style)


def indented(renderable: RenderableType, level: int = 1, columns: int = 0) -> Padding:
    # expand=False: padding to the full width would leave trailing spaces on every line.
    return Padding(renderable, (0, 0, 0, columns or INDENT * level), expand=False)
