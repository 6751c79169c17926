"""Text from case files and engines made safe to show: nothing in it can act on its reader.

`printable` shows control characters as escapes (``\\x1b``): an expression's comment or an
engine's message cannot move the cursor, set a terminal's title, hide a line or flip
text direction. `no_workflow_commands` keeps a line of a report from being a GitHub
Actions workflow command (a line starting ``::``, which a runner executes however the
line came to start so, a long comment wrapped included).
"""

from __future__ import annotations

import re

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


def no_workflow_commands(text: str) -> str:
    """Every line that would start with ``::`` (after blanks) gets a zero-width space
    between its colons: it reads the same, and a GitHub runner no longer acts on it."""
    return _COMMAND.sub("\\1:\u200b", text)
