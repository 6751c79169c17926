"""Value and shape patterns: what relates a wrong gradient to the right one.

Each analysis looks at one failing input: the reference gradient `want`, the engine's
`got`, and returns hints. A transform that turns `want` into `got` within tolerance
gives an `exact` hint; looser resemblances are `likely` or `possible`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from ...cases.model import Tolerance
from ...comparison.compare import close_mask
from ...ops import unbroadcast
from ...ops.broadcast import fmt_shape, sums_back
from ...results import Hint
from .dtypes import ULPS, within_rounding


@dataclass
class Subject:
    """One failing input, and what the analyses may compare it with."""

    name: str
    want: np.ndarray
    got: np.ndarray
    tolerance: Tolerance
    dtype: str  # whose rounding the differences are judged by (the engine's, if less precise)
    others: Mapping[str, np.ndarray]  # the other inputs' reference gradients
    reduced_sizes: frozenset[int]  # sizes N of the axes that mean/sum reductions reduce
    # what happens and how to mend it, when the engine computes in a lower precision
    precision_cause: tuple[str, str] | None = None
    # what the arrays are, as the messages name them: "x's gradient" unless given
    # ("the JVP along x", in forward mode)
    label: str | None = None
    # the other inputs' gradients as the engine computed them, where they are known: an
    # order swap shows in both directions, a rule using the wrong argument in one
    others_got: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def what(self) -> str:
        return self.label or f"{self.name}'s gradient"

    def __post_init__(self) -> None:
        # Gradients arrive in the engines' own dtypes; the analyses' ratios and sums
        # should not round in float16 or float32.
        self.want = np.asarray(self.want, np.float64)
        self.got = np.asarray(self.got, np.float64)
        self.others = {n: np.asarray(g, np.float64) for n, g in self.others.items()}
        self.others_got = {n: np.asarray(g, np.float64) for n, g in self.others_got.items()}

    def close(self, candidate: np.ndarray) -> bool:
        """Does `candidate` reproduce the engine's numbers?"""
        return _same(candidate, self.got, self.tolerance)


Analysis = Callable[[Subject], Iterator[Hint]]


def shape_hints(s: Subject) -> Iterator[Hint]:
    want, got = s.want.shape, s.got.shape
    if want == got:
        return
    extra = len(got) - len(want)
    if sums_back(got, want):
        size1 = [i for i, d in enumerate(want) if d == 1 and got[i + extra] != 1]
        summed = unbroadcast(s.got, want)
        leading = list(range(extra))
        if extra == 0:
            yield Hint(
                "unbroadcast-size1",
                f"{s.what} has shape {fmt_shape(got)}; {s.name} has shape "
                f"{fmt_shape(want)}: the axes {size1} where {s.name} has size 1 were not summed",
                f"also sum the axes where {s.name} has size 1 when unbroadcasting: "
                f"`g.sum(axis={tuple(size1)}, keepdims=True)`",
                _confidence(s, summed),
                axes=size1,
            )
        else:
            kept = [i + extra for i in size1]
            also = f", then axes {kept} with keepdims=True" if kept else ""
            yield Hint(
                "missing-unbroadcast",
                f"{s.what} has the broadcast shape {fmt_shape(got)}; {s.name} has "
                f"shape {fmt_shape(want)}",
                f"unbroadcast: sum over the leading axes {leading}{also}: "
                f"`g.sum(axis={tuple(leading)})`"
                + (f", `.sum(axis={tuple(size1)}, keepdims=True)`" if kept else ""),
                _confidence(s, summed),
                axes=leading + kept,
            )
        return
    squeezed = tuple(d for d in want if d != 1)
    if got == squeezed and len(got) < len(want):
        ones = [i for i, d in enumerate(want) if d == 1]
        yield Hint(
            "unbroadcast-size1",
            f"{s.what} has shape {fmt_shape(got)}; {s.name} has shape "
            f"{fmt_shape(want)}: the size-1 axes {ones} were summed away without keepdims",
            f"keep the size-1 axes when summing: `g.sum(axis={tuple(ones)}, keepdims=True)`",
            "exact" if np.allclose(s.got.reshape(want), s.want) else "likely",
            axes=ones,
        )
        return
    yield Hint(
        "shape-mismatch",
        f"{s.what} has shape {fmt_shape(got)}; {s.name} has shape {fmt_shape(want)}"
        + _shape_relation(want, got),
        f"return {s.name}'s gradient in {s.name}'s own shape {fmt_shape(want)}: look at the "
        "reshape, transpose or reduction that gave it its shape (`g.reshape(x.shape)`, "
        "`np.sum(g, axis, keepdims=True)`)",
        "exact",
    )


def _shape_relation(want: tuple[int, ...], got: tuple[int, ...]) -> str:
    if sorted(want) == sorted(got):
        return " (the same axes in another order: a transpose?)"
    if math.prod(want) == math.prod(got):
        return " (the same number of elements: a missing reshape?)"
    if len(got) < len(want):
        return " (fewer axes: a reduction without keepdims?)"
    return ""


def _confidence(s: Subject, candidate: np.ndarray) -> str:
    if candidate.shape == s.want.shape and np.all(close_mask(s.want, candidate, s.tolerance)):
        return "exact"
    return "likely"


def value_hints(s: Subject) -> Iterator[Hint]:
    if s.want.shape != s.got.shape:
        return
    yield from _nan_hint(s)
    yield from _precision_hint(s)
    yield from _zero_hint(s)
    yield from _scale_hint(s)
    yield from _transpose_hints(s)
    yield from _swapped_hint(s)


def _nan_hint(s: Subject) -> Iterator[Hint]:
    want_bad, got_bad = ~np.isfinite(s.want), ~np.isfinite(s.got)
    if np.array_equal(want_bad, got_bad):
        return
    where = "the engine has NaN/Inf where the reference is finite"
    if np.any(want_bad & ~got_bad):
        where = "the reference has NaN/Inf where the engine is finite"
    yield Hint(
        "nan-mismatch",
        f"{s.name}: {where} ({int(np.count_nonzero(want_bad != got_bad))} elements)",
        "look for a division by zero, a log or sqrt of 0, an exp that overflows or inf - inf "
        "in the backward pass; guard it (`np.where(x != 0, g / x, 0)`) or use the output "
        "form (`g * y * (1 - y)` for sigmoid)",
        "exact",
    )


def _precision_hint(s: Subject) -> Iterator[Hint]:
    rounding, worst = within_rounding(s.want, s.got, s.dtype)
    if not rounding:
        return
    if s.precision_cause:
        message = f"{s.name}: every difference is within {ULPS} ulps of {s.dtype} "
        message += f"(max abs diff {worst:.3g}): {s.precision_cause[0]}"
        fix = s.precision_cause[1]
    else:
        message = f"{s.name}: every difference is within {ULPS} ulps of {s.dtype} "
        message += f"(max abs diff {worst:.3g}): rounding, not a bug"
        fix = "loosen the tolerance (`tolerance: {rtol: 1e-5, atol: 1e-8}`) or compute in float64"
    yield Hint("precision", message, fix, "likely")


def _zero_hint(s: Subject) -> Iterator[Hint]:
    zeros = (s.got == 0) & (s.want != 0)
    if not np.any(zeros):
        return
    everywhere = bool(np.all(s.got == 0))
    yield Hint(
        "zero-gradient",
        f"{s.what} is zero "
        + ("everywhere" if everywhere else f"at {int(zeros.sum())} of {zeros.size} elements")
        + " where the reference is not: the gradient was not propagated",
        f"make the backward pass reach {s.name} and keep its contributions "
        "(`grad[x] = grad[x] + share`; no `detach`, no constant where a leaf belongs)",
        "exact" if everywhere else "possible",
    )


def _scale_hint(s: Subject) -> Iterator[Hint]:
    norm = float(np.vdot(s.want, s.want))
    if norm == 0 or not np.isfinite(norm):
        return
    factor = float(np.vdot(s.want, s.got)) / norm
    if not np.isfinite(factor) or abs(factor) < 1e-12 or not s.close(factor * s.want):
        return
    if math.isclose(factor, 1.0, rel_tol=1e-6):
        return  # "1 × the reference" explains nothing: the difference is rounding
    if math.isclose(factor, -1.0, rel_tol=1e-6):
        yield Hint(
            "sign-flip",
            f"{s.what} is the negated reference",
            "look for a sign error in a VJP: `-g` for b in a - b, `-g * a / b**2` for div's "
            "denominator, `-g * np.sin(x)` for cos",
            "exact",
            factor=-1.0,
        )
        return
    yield Hint(
        "scaled",
        f"{s.what} is {nice(factor)} × the reference{_scale_reason(s, factor)}",
        _scale_fix(s, factor),
        "exact",
        factor=nice(factor),
    )


def nice(factor: float) -> float:
    """A factor as the integer or 1/integer it is close to, else rounded."""
    for candidate in (round(factor), 1 / round(1 / factor) if abs(factor) < 1 else None):
        if candidate and math.isclose(factor, candidate, rel_tol=1e-6):
            return float(candidate)
    return round(factor, 6)


def _reduction_size(s: Subject, factor: float) -> int | None:
    for n in sorted(s.reduced_sizes):
        if n > 1 and (
            math.isclose(factor, n, rel_tol=1e-6) or math.isclose(factor, 1 / n, rel_tol=1e-6)
        ):
            return n
    return None


def _scale_reason(s: Subject, factor: float) -> str:
    n = _reduction_size(s, factor)
    if math.isclose(factor, 2.0, rel_tol=1e-6):
        return ": double counted" + (f", or mean vs sum (N = {n})" if n is not None else "")
    if n is not None:
        return f": mean vs sum (N = {n})"
    return ""


def _scale_fix(s: Subject, factor: float) -> str:
    if math.isclose(factor, 2.0, rel_tol=1e-6):
        return (
            "a contribution is added twice: accumulate each consumer's share once "
            "(`grad[x] = grad[x] + share`), also when an op takes the same value twice"
        )
    if _reduction_size(s, factor) is not None:
        return (
            "mean's VJP divides by N, the number of elements each mean averages "
            "(`np.broadcast_to(g.reshape(kept_shape), x.shape) / n`); sum's does not"
        )
    return (
        f"find the constant factor {nice(factor)} in the VJPs this input's gradient passes "
        f"through (`gradcheck ops` lists each op's rule)"
    )


def _transpose_hints(s: Subject) -> Iterator[Hint]:
    if s.want.ndim < 2:
        return
    for i, j in itertools.combinations(range(s.want.ndim), 2):
        if s.want.shape[i] == s.want.shape[j] and s.close(np.swapaxes(s.want, i, j)):
            yield Hint(
                "transposed",
                f"{s.what} is the reference with axes {i} and {j} swapped",
                f"transpose the gradient back (`np.swapaxes(g, {i}, {j})`); for a batched "
                "matmul swap only the last two axes (`np.swapaxes(b, -1, -2)`), never all of them",
                "exact",
                axes=[i, j],
            )
            return
    if s.want.ndim > 2 and s.close(np.transpose(s.want)):
        yield Hint(
            "transposed",
            f"{s.what} is the reference with every axis reversed",
            "a full transpose reverses all axes: swap only the two you mean "
            "(`np.swapaxes(t, -1, -2)`, `tf.linalg.matrix_transpose(t)`)",
            "exact",
            axes=list(reversed(range(s.want.ndim))),
        )


def _swapped_hint(s: Subject) -> Iterator[Hint]:
    for other, grad in s.others.items():
        if not (grad.shape == s.got.shape and s.close(grad) and not s.close(s.want)):
            continue
        theirs = s.others_got.get(other)
        if theirs is None or _same(theirs, s.want, s.tolerance):
            yield Hint(
                "swapped-gradients",
                f"{s.what} equals the reference gradient of {other}",
                f"the gradients of {s.name} and {other} are returned in the wrong order "
                "or computed from the wrong argument: `grad` returns one array per wrt node, "
                "in wrt's order (`[grads[n] for n in wrt]`)",
                "exact",
            )
        else:  # the engine's gradient of `other` is not ours: no order swap
            yield Hint(
                "swapped-gradients",
                f"{s.what} equals the reference gradient of {other}, but {other}'s is not "
                f"{s.name}'s: not an order swap, {s.name}'s gradient is computed as "
                f"{other}'s is",
                f"a rule computes {s.name}'s gradient from the wrong argument (the nodes "
                "checked alone name the op; `gradcheck ops --rules` lists each op's rule)",
                "likely",
            )


def _same(a: np.ndarray, b: np.ndarray, tolerance: Tolerance) -> bool:
    return a.shape == b.shape and bool(close_mask(a, b, tolerance).all())


ANALYSES: tuple[Analysis, ...] = (shape_hints, value_hints)


def layout(got: tuple[int, ...], want: tuple[int, ...]) -> tuple[str, str]:
    """What is wrong with a gradient of the right elements in shape `got`, and the mend."""
    same_axes = tuple(d for d in got if d != 1) == tuple(d for d in want if d != 1)
    if same_axes and len(got) > len(want):
        return (
            "keeps size-1 axes the argument does not have (keepdims left in)",
            f"drop them: reshape to {fmt_shape(want)}, or sum without keepdims",
        )
    if same_axes:
        return (
            "lost the argument's size-1 axes (summed without keepdims)",
            "sum with keepdims=True over the axes where the argument has size 1",
        )
    return (
        "holds the right elements in the wrong layout (a missing reshape)",
        f"reshape it to {fmt_shape(want)}",
    )
