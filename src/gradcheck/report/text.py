"""Text from case files and engines made safe to show: nothing in it can act on its reader.

`printable` shows control characters as escapes (``\\x1b``): an expression's comment or an
engine's message cannot move the cursor, set a terminal's title, hide a line or flip
text direction. `no_workflow_commands` keeps a line of a report from being a GitHub
Actions workflow command (a line starting ``::``, which a runner executes however the
line came to start so, a long comment wrapped included).
"""

from __future__ import annotations

import contextlib
import re
import textwrap
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

# C0 controls but tab and newline, DEL, C1 controls, and Unicode's bidirectional
# embeddings, overrides and isolates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# What `colour=True` keeps: SGR sequences (colours and weights), which rich decodes.
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_COMMAND = re.compile(r"^(\s*):(?=:)", re.MULTILINE)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, colour: bool = False) -> str:
    """`text` with its control characters escaped; with `colour`, SGR colour sequences kept."""
    if not colour:
        return _CONTROL.sub(_escape, text)
    parts = _SGR.split(text)
    codes = _SGR.findall(text)
    out = [_CONTROL.sub(_escape, parts[0])]
    for code, part in zip(codes, parts[1:], strict=True):
        out += [code, _CONTROL.sub(_escape, part)]
    return "".join(out)


def expr_lines(expr: str) -> list[str]:
    """An expression's lines, control characters escaped, blank ones and the common margin
    dropped: a block scalar's lines as the case file shows them."""
    lines = [line.rstrip() for line in printable(expr.strip("\n")).splitlines()]
    lines = [line for line in lines if line.strip()]
    margin = min(len(line) - len(line.lstrip()) for line in lines) if lines else 0
    return [line[margin:] for line in lines]


def no_workflow_commands(text: str) -> str:
    """Every line that would start with ``::`` (after blanks) gets a zero-width space
    between its colons: it reads the same, and a GitHub runner no longer acts on it."""
    return _COMMAND.sub("\\1:\u200b", text)


# Blanks at the end of a line, before any colour codes that end it.
_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)


def without_trailing_blanks(text: str) -> str:
    """`text` with no blank at the end of any line: rich pads a table's cells to the
    column's width, which leaves trailing spaces a diff or an editor shows."""
    return _TRAILING.sub("\\1", text)


@contextlib.contextmanager
def written_whole(console: Console) -> Iterator[None]:
    """What is printed to `console` inside, written at the end in one piece: without the
    blanks rich pads lines with and, off a terminal (a CI log), with no line that can
    start a workflow command."""
    with console.capture() as captured:
        yield
    text = without_trailing_blanks(captured.get())
    console.file.write(text if console.is_terminal else no_workflow_commands(text))


def wrap_lines(text: str, width: int) -> str:
    """Each line of `text` (a traceback, what an engine printed) wrapped at words to
    `width`, its continuations indented past the line's own indent, so code stays
    readable as code; a word longer than a line is cut."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(
            line,
            width,
            subsequent_indent=indent + "    " if len(indent) + 4 < width // 2 else indent,
            break_on_hyphens=False,
            drop_whitespace=True,
        ) or [line[:width]]
    return "\n".join(out)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 case`, `2 cases` (`nouns` when the plural is not `noun` + s)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"
