"""The machinery of the table that writes JAX primitives as registry ops
(`jax_primitives.LAX`): what an entry gets (`V`, `Eqn`, `Emit`), what it raises where the
registry has no exact equivalent (`Unmapped`, shared with the ATen table), and the helpers
entries share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .program import call, scalar
from .tables import Emit, Unmapped, V, need

__all__ = ["LAX", "Emit", "Eqn", "Unmapped", "V", "lax", "need"]


@dataclass
class Eqn:
    """One equation as an entry sees it: the primitive's name, its operands, its parameters,
    its outputs' shapes and the case's dtype (what every value of the expression is in)."""

    name: str
    args: list[V]
    params: dict[str, Any]
    out: list[tuple[int, ...]] = field(default_factory=list)
    dtype: str = "float64"

    @property
    def x(self) -> V:
        """The first operand (the only one of most primitives)."""
        return self.args[0]


Entry = Callable[[Emit, Eqn], Any]
LAX: dict[str, Entry] = {}


def lax(*names: str) -> Callable[[Entry], Entry]:
    def register(entry: Entry) -> Entry:
        for name in names:
            LAX[name] = entry
        return entry

    return register


def constant_scalar(v: V) -> float:
    """A constant operand that is one number (a literal, a pad's value), as a float."""
    need(v.const and v.value.size == 1, "an operand that is not a constant number")
    return float(v.value.reshape(()))


def axes(dims: Any, ndim: int) -> list[int] | None:
    """A primitive's axes as an axis attribute: None for every axis of a non-scalar."""
    dims = [int(d) for d in dims]
    return None if ndim and sorted(dims) == list(range(ndim)) else dims


def fit(v: V, shape: Any) -> str:
    """`v` as a value of `shape`: broadcast where it is smaller (a select's scalar case)."""
    return v.text if v.shape == tuple(shape) else call("broadcast_to", v.text, shape=list(shape))


def number(value: float) -> str:
    """A finite number as an operand (a non-finite one has no literal: no exact mapping)."""
    need(bool(np.isfinite(value)), f"the non-finite constant {value}")
    return scalar(value)
