"""The lines of a case file that hold one case, with their numbers, for a report to show.

The line a result names (`CaseResult.line`) is its case's `- name:` line, or for an
invalid case the line of the problem, inside the case. The case starts at the nearest
list item of `cases:` at or above it, and runs while the lines after that are indented
past the column its keys start at; blank lines and comments between its keys belong
to it, those after it do not. A file laid out otherwise (flow style) shows from the
named line on.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_LINES = 40  # a case with a long inline array is cut here; the report says so
MAX_WIDTH = 160  # characters of one line
CASES_KEY = re.compile(r"cases\s*:\s*(#.*)?$")


def read_lines(file: str) -> list[str] | None:
    """The case file's lines, or None when it cannot be read (moved since the run, or a
    case given as data through the Python API)."""
    try:
        return Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, ValueError):
        return None


def case_source(lines: list[str], line: int) -> tuple[list[tuple[int, str]], bool]:
    """The (number, text) lines of the case holding `line`, and whether they were cut."""
    if not 1 <= line <= len(lines):
        return [], False
    start = _case_start(lines, line)
    first = lines[start - 1]
    keys_at = len(first) - len(first.lstrip(" -"))  # the column after `- `
    end = max(start, line)
    for number in range(start + 1, len(lines) + 1):
        body = lines[number - 1]
        stripped = body.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(body) - len(body.lstrip(" ")) < keys_at:
            break
        end = max(end, number)
    numbered = [(n, _cut(lines[n - 1])) for n in range(start, end + 1)]
    return numbered[:MAX_LINES], len(numbered) > MAX_LINES


def _case_start(lines: list[str], line: int) -> int:
    """The `- ` line of the `cases:` item holding `line`, or `line` when there is none."""
    key = next((n for n, text in enumerate(lines, 1) if CASES_KEY.match(text)), None)
    if key is None or key >= line:
        return line
    items = [n for n in range(key + 1, line + 1) if lines[n - 1].lstrip(" ").startswith("-")]
    if not items:
        return line
    column = _indent(lines[items[0] - 1])  # where the first case's dash is
    return next(n for n in reversed(items) if _indent(lines[n - 1]) == column)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_WIDTH else text[: MAX_WIDTH - 1] + "…"
