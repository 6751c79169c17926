"""Subgradient conventions: what an op's VJP may give at a kink or a tie (SPEC §4, §6.1).

Where an op is not differentiable (relu, abs, leaky_relu, elu and selu at 0, maximum/minimum
at a tie, the max/min reductions and max-pools over tied elements, pow's exponent where
the base is <= 0) any
subgradient is defensible, and engines differ: TensorFlow gives a maximum tie to its
first argument, JAX and HIPS autograd split it, mygrad gives it to neither. Each
convention here is the op's VJP with that choice made, so the builtin engine can follow
it: the diagnosis names what an engine did by finding the convention that reproduces
it, and an adapter that declares ``conventions = {"maximum": "split"}`` is judged
against TensorFlow's answer corrected by that convention. `TENSORFLOW` names the
registry's own choice for each op.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .broadcast import expand_reduced, normalize_axes
from .pooling import POOL_SCATTER
from .reductions import spread
from .registry import VJP


@dataclass(frozen=True)
class Convention:
    op: str
    name: str
    does: str  # what the VJP does there, in words
    subgradient: bool  # its parts sum to the upstream gradient (a valid choice)
    vjps: Mapping[int, VJP] = field(default_factory=dict)  # arg -> rule; {} is the registry's

    def __post_init__(self) -> None:
        object.__setattr__(self, "vjps", MappingProxyType(dict(self.vjps)))

    @property
    def code(self) -> str:
        return f"{self.op}:{self.name}"


def _where_zero(factor: float, sign: bool):
    def rule(g, ans, x):
        slope = np.sign(x) if sign else (x > 0).astype(x.dtype)
        return g * np.where(x == 0, factor, slope)

    return rule


def _pick(a_share: float, b_share: float, wins):
    """maximum/minimum's VJPs with a tie's gradient shared a_share : b_share."""
    return {
        0: lambda g, ans, a, b: g * np.where(a == b, a_share, wins(a, b)),
        1: lambda g, ans, a, b: g * np.where(a == b, b_share, wins(b, a)),
    }


def _ties(choose):
    """A max/min reduction's VJP that gives each group of tied elements `choose(winners)`."""

    def rule(g, ans, x, axis, keepdims):
        winners = x == expand_reduced(ans, x.shape, axis, keepdims)
        return spread(g, x, axis, keepdims) * choose(winners, normalize_axes(axis, x.ndim))

    return rule


def _first(winners: np.ndarray, axes: tuple[int, ...], *, last: bool = False) -> np.ndarray:
    """Only the first (or last) winner of each group, in C order over the reduced axes."""
    kept = [a for a in range(winners.ndim) if a not in axes]
    moved = np.moveaxis(winners, kept + list(axes), range(winners.ndim))
    flat = moved.reshape(*moved.shape[: len(kept)], -1)
    rank = np.cumsum(flat[..., ::-1] if last else flat, axis=-1)
    only = flat & ((rank[..., ::-1] if last else rank) == 1)
    return np.moveaxis(only.reshape(moved.shape), range(winners.ndim), kept + list(axes))


def _at_bounds(factor: float):
    """clip's VJP with `factor` of the gradient at lo and hi."""

    def rule(g, ans, x, lo, hi):
        return g * np.where((x == lo) | (x == hi), factor, (x > lo) & (x < hi))

    return rule


def _exponent_nan(g, ans, a, b):
    # log(a) as it comes: NaN where a < 0; 0 where a == 0, as PyTorch, JAX and autograd do.
    with np.errstate(all="ignore"):
        return g * ans * np.where(a == 0, 0.0, np.log(a))


def _leaky_one(g, ans, x, alpha):
    return g * np.where(x >= 0, 1.0, alpha)


def _elu_positive(g, ans, x, alpha):
    return g * np.where(x >= 0, 1.0, ans + alpha)


def _selu_negative(g, ans, x):
    # The negative branch's slope at 0, scale * alpha.
    return g * np.where(x <= 0, ans + 1.0507009873554805 * 1.6732632423543772, 1.0507009873554805)


def _pool_split(g, ans, x, **attrs):
    """A max-pool's VJP with each window's gradient shared among its tied maxima."""
    return POOL_SCATTER(g, x, mode="max-split", rank=np.ndim(x) - 2, **attrs)


_GT = np.greater
_LT = np.less

# The catalogue is a table, laid out by hand: one convention per line.
# fmt: off
_SPLIT, _FIRST_TO_B, _NEITHER, _BOTH = (0.5, 0.5), (0, 1), (0, 0), (1, 1)
_CATALOGUE: tuple[Convention, ...] = (
    Convention("relu", "zero", "takes relu'(0) = 0", True),
    Convention("relu", "half", "takes relu'(0) = 0.5", True, {0: _where_zero(0.5, False)}),
    Convention("relu", "one", "takes relu'(0) = 1", True, {0: _where_zero(1.0, False)}),
    Convention("abs", "zero", "takes abs'(0) = 0 (sign(0))", True),
    Convention("abs", "half", "takes abs'(0) = 0.5", True, {0: _where_zero(0.5, True)}),
    Convention("abs", "one", "takes abs'(0) = 1", True, {0: _where_zero(1.0, True)}),
    Convention("leaky_relu", "alpha", "takes leaky_relu'(0) = alpha", True),
    Convention("leaky_relu", "one", "takes leaky_relu'(0) = 1", True, {0: _leaky_one}),
    Convention("elu", "negative", "takes elu'(0) = alpha, the negative branch's slope", True),
    Convention("elu", "positive", "takes elu'(0) = 1, the positive branch's slope", True,
               {0: _elu_positive}),
    Convention("sign", "zero", "takes sign'(0) = 0, as everywhere else", True),
    Convention("selu", "positive", "takes selu'(0) = scale, the positive branch's slope", True),
    Convention("selu", "negative", "takes selu'(0) = scale * alpha, the negative branch's slope",
               True, {0: _selu_negative}),
    Convention("pow", "zero", "takes the exponent's gradient as 0 where a <= 0", True),
    Convention("clip", "pass", "passes the gradient at lo and hi, as inside", True),
    Convention("clip", "half", "passes half the gradient at lo and hi", True, {0: _at_bounds(0.5)}),
    Convention("clip", "stop", "gives 0 at lo and hi, as outside", True, {0: _at_bounds(0.0)}),
    Convention("pow", "nan", "gives the exponent NaN where a < 0 (log of a negative base)", False,
               {1: _exponent_nan}),
)
for _op, _wins in (("maximum", _GT), ("minimum", _LT)):
    _CATALOGUE += (
        Convention(_op, "first", "gives a tie's whole gradient to a", True),
        Convention(_op, "split", "splits a tie 0.5/0.5 between a and b", True,
                   _pick(*_SPLIT, _wins)),
        Convention(_op, "second", "gives a tie's whole gradient to b", True,
                   _pick(*_FIRST_TO_B, _wins)),
        Convention(_op, "none", "gives a tie's gradient to neither a nor b", False,
                   _pick(*_NEITHER, _wins)),
        Convention(_op, "all", "gives a tie's whole gradient to both a and b", False,
                   _pick(*_BOTH, _wins)),
    )
for _op in ("max", "min"):
    _CATALOGUE += (
        Convention(_op, "split", "splits the gradient equally among tied elements", True),
        Convention(_op, "first", "gives the whole gradient to the first tied element", True,
                   {0: _ties(_first)}),
        Convention(_op, "last", "gives the whole gradient to the last tied element", True,
                   {0: _ties(lambda w, axes: _first(w, axes, last=True))}),
        Convention(_op, "all", "gives the whole gradient to every tied element", False,
                   {0: _ties(lambda w, axes: w)}),
    )
for _op in ("max_pool2d", "max_pool1d"):
    _CATALOGUE += (
        Convention(_op, "first", "gives a window's whole gradient to its first maximum", True),
        Convention(_op, "split", "splits a window's gradient equally among its maxima", True,
                   {0: _pool_split}),
    )
# fmt: on

CONVENTIONS: dict[str, dict[str, Convention]] = {}
for _c in _CATALOGUE:
    CONVENTIONS.setdefault(_c.op, {})[_c.name] = _c
# The registry's (TensorFlow's) choice: the conventions without overrides.
TENSORFLOW: dict[str, str] = {c.op: c.name for c in _CATALOGUE if not c.vjps}


def check_declared(declared: object) -> dict[str, str]:
    """An adapter's `conventions` mapping, validated; `ValueError` says what is wrong."""
    if not isinstance(declared, Mapping):
        raise ValueError(
            f"conventions must be a dict such as {{'maximum': 'split'}}, got {declared!r}"
        )
    for op, name in declared.items():
        if op not in CONVENTIONS:
            raise ValueError(
                f"conventions[{op!r}]: no convention to choose for {op!r} "
                f"(ops with kinks or ties: {', '.join(CONVENTIONS)})"
            )
        if name not in CONVENTIONS[op]:
            raise ValueError(
                f"conventions[{op!r}] = {name!r} is not one of {', '.join(CONVENTIONS[op])}"
            )
    return dict(declared)


def convention_rules(declared: Mapping[str, str]) -> dict[tuple[str, int], VJP]:
    """The VJP overrides that make the registry follow `declared`, keyed (op, arg)."""
    return {
        (op, arg): rule
        for op, name in declared.items()
        for arg, rule in CONVENTIONS[op][name].vjps.items()
    }
