"""The lines of a case file that hold one case, with their numbers, for a report to show.

A case starts at the line the loader recorded (`CaseResult.line`, its `- name:` line)
and runs while the lines after it are indented past the column its keys start at;
blank lines and comments between its keys belong to it, those after it do not.
"""

from __future__ import annotations

from pathlib import Path

MAX_LINES = 40  # a case with a long inline array is cut here; the report says so
MAX_WIDTH = 160  # characters of one line


def read_lines(file: str) -> list[str] | None:
    """The case file's lines, or None when it cannot be read (moved since the run, or a
    case given as data through the Python API)."""
    try:
        return Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, ValueError):
        return None


def case_source(lines: list[str], line: int) -> tuple[list[tuple[int, str]], bool]:
    """The (number, text) lines of the case starting at `line`, and whether they were cut."""
    if not 1 <= line <= len(lines):
        return [], False
    first = lines[line - 1]
    keys_at = len(first) - len(first.lstrip(" -"))  # the column after `- `
    end = line
    for number in range(line + 1, len(lines) + 1):
        body = lines[number - 1]
        stripped = body.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(body) - len(body.lstrip(" ")) < keys_at:
            break
        end = number
    numbered = [(n, _cut(lines[n - 1])) for n in range(line, end + 1)]
    return numbered[:MAX_LINES], len(numbered) > MAX_LINES


def _cut(text: str) -> str:
    return text if len(text) <= MAX_WIDTH else text[: MAX_WIDTH - 1] + "…"
