"""Text for the HTML report and its SVG pictures: user text made safe, shapes, numbers.

Everything from a user or an engine (names, expressions, messages, tracebacks, case
files) goes through `text()`: colour codes dropped, other control characters shown as
escapes as in every report (`report.text.printable`; HTML forbids them), then escaped
for an element or a quoted attribute.
"""

from __future__ import annotations

import re
from html import escape

from .text import printable

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def text(value: object) -> str:
    """Any user or engine text, safe as HTML text or a quoted attribute value."""
    string = printable(ANSI.sub("", str(value)))
    # Lone surrogates (undecodable bytes an engine printed) cannot be written as UTF-8.
    string = string.encode("utf-8", "backslashreplace").decode("utf-8")
    return escape(string, quote=True)


def shape(dims: tuple[int, ...]) -> str:
    return "scalar" if not dims else str(tuple(dims))


def number(value: float | None) -> str:
    """A difference as the tables print it; None (no value, shapes differ) as "-"."""
    return "-" if value is None else f"{value:.3g}"
