"""`-k` selection: pick cases by name or tag, as pytest's `-k` picks tests.

The expression is a substring of the case name or one of its tags; `not`, `and` and
`or` combine them (`or` binds loosest), e.g. ``-k "matmul and not slow"``.
"""

from __future__ import annotations

from collections.abc import Iterable


def matches(expression: str, name: str, tags: Iterable[str] = ()) -> bool:
    words = [name.lower(), *(t.lower() for t in tags)]

    def term(text: str) -> bool:
        negate = text.startswith("not ")
        needle = text[4:].strip() if negate else text
        found = any(needle.lower() in w for w in words)
        return found != negate

    return any(
        all(term(t.strip()) for t in alternative.split(" and "))
        for alternative in expression.strip().split(" or ")
    )
