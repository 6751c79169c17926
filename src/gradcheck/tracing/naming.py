"""What both tracers' builders share, whatever the framework: a binding's name from the
user's line (`assigned`), the text of one output of a several-output op (`is_part`), and
the rule texts an opaque op takes from the registry op a custom rule's forward is
(`rule_texts`)."""

from __future__ import annotations

import ast
from typing import Any

from .program import Where

_RULE_FIELDS = {("rev", "numpy"): "rules", ("rev", "tensorflow"): "tf_rules",
                ("rev", "torch"): "torch_rules", ("rev", "jax"): "jax_rules",
                ("fwd", "numpy"): "jvp_rules", ("fwd", "tensorflow"): "tf_jvp_rules",
                ("fwd", "torch"): "torch_jvp_rules", ("fwd", "jax"): "jax_jvp_rules"}  # fmt: skip


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


def rule_texts(op: Any) -> dict[str, tuple]:
    """Every rule text of `op`, in each spelling, as an opaque op declares them."""
    texts = {}
    for (mode, spelling), key in _RULE_FIELDS.items():
        said = tuple(op.rule(i, spelling, mode) for i in range(len(op.params)))
        if all(said):
            texts[key] = said
    return texts
