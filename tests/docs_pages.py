"""The user docs as the tests read them: README.md and docs/*.md, a page's section found
by its heading, and the anchors GitHub gives headings. Code blocks are not markdown: a
`# comment` in one is no heading."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[str | None]:
    """The page's lines, None for each line inside a fenced code block (fences too)."""
    lines: list[str | None] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            lines.append(None)
        else:
            lines.append(None if fenced else line)
    return lines


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line index, level, title) of each heading of the page."""
    found = []
    for i, line in enumerate(prose_lines(text)):
        match = re.match(r"(#{1,6}) +(.+?) *$", line or "")
        if match:
            found.append((i, len(match.group(1)), match.group(2)))
    return found


def section(page: str, heading: str) -> str:
    """The text under `heading` (its title exactly, any level) on `page` (a path from the
    project's root), to the next heading of its level or above: its own subsections
    included."""
    text = (ROOT / page).read_text()
    lines = text.splitlines()
    found = headings(text)
    starts = [(i, level) for i, level, title in found if title == heading]
    assert len(starts) == 1, f"{page} has {len(starts)} sections titled {heading!r}"
    start, level = starts[0]
    end = next((i for i, lv, _ in found if i > start and lv <= level), len(lines))
    return "\n".join(lines[start + 1 : end]) + "\n"


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped (word characters,
    spaces and hyphens kept), each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a page; a repeated heading's anchor gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    result = set()
    for _, _, title in headings(text):
        base = anchor(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result
