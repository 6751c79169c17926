"""The fault catalogue: known autodiff bugs, each a small named change to the builtin engine.

A `Fault` replaces one VJP rule, the unbroadcast step of some ops, or the backward
driver (`faults.FaultyEngine` switches one on); a forward-mode fault (``check="jvp"``)
replaces JVP rules or the step that broadcasts a tangent to the output's shape. Each
entry says the bug in one sentence and the fix in one line, with the code to write;
`seen` points at a public bug report of that class, where one is known (owner/repo#number).
What an entry is, and the wrong rules too long for a lambda here, are in `rules.py`. The
entries live by family, one module each; this table joins them in the order they are tried
(the first that reproduces a node names it), the backward driver's and forward mode's last.
"""

from __future__ import annotations

from ....ops import get_op
from ..rules import Fault
from . import (
    broadcasting,
    driver,
    elementwise,
    indexing,
    layout,
    linalg,
    norms,
    reductions,
    windows,
)
from .broadcasting import BINARY_ELEMENTWISE, BROADCASTING, UNBROADCAST

CATALOGUE: tuple[Fault, ...] = (
    *broadcasting.FAULTS,
    *elementwise.FAULTS,
    *reductions.FAULTS,
    *layout.FAULTS,
    *windows.FAULTS,
    *indexing.FAULTS,
    *norms.FAULTS,
    *linalg.FAULTS,
    *driver.FAULTS,
)

FAULTS: dict[str, Fault] = {f.name: f for f in CATALOGUE}

__all__ = ["BINARY_ELEMENTWISE", "BROADCASTING", "CATALOGUE", "FAULTS", "UNBROADCAST", "Fault"]


def _check_catalogue() -> None:
    for fault in CATALOGUE:
        for op_name, i in fault.vjps:
            op = get_op(op_name)  # a typo in an op name fails at import, not at diagnosis time
            if i >= max(1, len(op.params)):
                raise ValueError(f"fault {fault.name}: {op_name} has no argument {i}")
    if len(FAULTS) != len(CATALOGUE):
        raise ValueError("two catalogue faults share a name")


_check_catalogue()
