"""What both tracers' builders share, whatever the framework: a binding's name from the
user's line (`assigned`), and the text of one output of a several-output op (`is_part`)."""

from __future__ import annotations

import ast

from .program import Where


def assigned(where: Where | None) -> str | None:
    """The variable the user's line assigns (``h = ...``, ``self.h = ...``), if one."""
    if where is None or not where.code:
        return None
    try:
        statement = ast.parse(where.code).body[0]
    except (SyntaxError, IndexError):
        return None
    targets = getattr(statement, "targets", None) or [getattr(statement, "target", None)]
    if len(targets) != 1 or targets[0] is None:
        return None
    target = targets[0]
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else None


def is_part(text: str) -> bool:
    """Whether `text` is one output of a bound several-output op: ``parts[1]``."""
    head, _, rest = text.partition("[")
    return head.isidentifier() and rest[:-1].isdigit() and text.endswith("]")
