"""What a catalogue entry is (`Fault`), and the wrong rules the entries plant.

`catalogue/` is the table of faults (a module per op family); the rules too long for a
lambda in its rows live here: the wrong unbroadcast steps (`Fault.reduce`) and the wrong
VJPs that several entries or ops share. Each is the buggy code as an engine would have written it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ...ops.broadcast import expand_reduced
from ...ops.reductions import spread
from ...ops.registry import JVP, VJP

Reduce = Callable[[np.ndarray, tuple[int, ...]], np.ndarray]


@dataclass(frozen=True)
class Fault:
    name: str  # "<op>.<variant>", or "broadcast.*" / "backprop.*" for the shared steps
    summary: str  # the bug, in one sentence
    fix: str  # what to change, in one line, with the code to write
    vjps: Mapping[tuple[str, int], VJP] = field(default_factory=dict)  # (op, arg) -> rule
    reduce: Reduce | None = None  # replaces unbroadcast ...
    reduce_ops: frozenset[str] = frozenset()  # ... for these ops
    driver: str | None = None  # a backward-driver variant, see FaultyEngine.backward
    seen: str = ""  # a public report of this bug class
    check: str = "vjp"  # what the fault breaks: the VJPs, or the JVPs (forward mode)
    jvps: Mapping[tuple[str, int], JVP] = field(default_factory=dict)  # (op, arg) -> rule
    unbroadcast_tangent: frozenset[str] = frozenset()  # ops whose tangent stays as it is
    # A shared step's fault said at the op where it struck: "{op}'s VJP does not sum its
    # size-1 {axes}" ({axes}: "batch axes" at matmul, else "axes").
    at_op: str = ""

    @property
    def ops(self) -> frozenset[str]:
        """The ops whose presence in an expression makes this fault worth trying."""
        return (
            frozenset(op for op, _ in [*self.vjps, *self.jvps])
            | self.reduce_ops
            | self.unbroadcast_tangent
        )

    @property
    def code(self) -> str:
        return f"fault:{self.name}"


# -- wrong unbroadcast steps (g in the broadcast shape, shape the argument's) ---------------


def leading_only(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    lead = g.ndim - len(shape)
    return g.sum(axis=tuple(range(lead))) if lead > 0 else g


def leading_kept(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sums what unbroadcast sums, but with keepdims=True on the leading axes too."""
    lead = g.ndim - len(shape)
    padded = (1,) * lead + tuple(shape)
    axes = tuple(i for i, d in enumerate(padded) if d == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def no_reduce(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return g


# -- wrong VJPs --------------------------------------------------------------------------


def all_ties(g, ans, x, axis, keepdims):
    return spread(g, x, axis, keepdims) * (x == expand_reduced(ans, x.shape, axis, keepdims))


def ties_without_g(g, ans, x, axis, keepdims):
    winners = x == expand_reduced(ans, x.shape, axis, keepdims)
    return (
        spread(np.ones_like(g), x, axis, keepdims)
        * winners
        / winners.sum(axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=True)
    )


def mask_without_g(wins: Callable, first: bool) -> VJP:
    """maximum/minimum's mask for a (first) or b, without g: the cotangent is dropped."""
    if first:
        return lambda g, ans, a, b: np.broadcast_to(wins(a, b), g.shape).astype(g.dtype)
    return lambda g, ans, a, b: np.broadcast_to(~wins(a, b), g.shape).astype(g.dtype)


def concat_first_axis(g, ans, xs, i, axis):
    offsets = np.cumsum([x.shape[axis] for x in xs])[:-1]
    return np.split(g, offsets, axis=0)[i]


def vjp_as_jvp(vjp: VJP) -> JVP:
    """A VJP used as a JVP: the tangent t where the cotangent g goes."""
    return lambda t, ans, *args, **attrs: vjp(t, ans, *args, **attrs)
