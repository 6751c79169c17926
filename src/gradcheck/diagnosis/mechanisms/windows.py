"""Mechanism probes of windowed and indexed ops (SPEC §6.1; issue 25): pools, convolutions,
gathers, pad, roll and the cumulative ops.

Their rules go wrong in ways the generic probes of `probes.Prober` cannot name (a window's
gradient sent to the wrong element is neither zero nor a factor of the right one), so each
probe here runs the engine's rule for the node alone on designed cotangents and inputs and
compares it with the right VJP on the same ones:

* a spike cotangent (one output element 1, the rest 0) shows where that element's gradient
  goes: to the window's maximum, to the whole window, to another element of it, divided by
  the full window at a padded border, rolled by the wrong shift, accumulated the wrong way
  along a cumulative axis (`spikes`);
* the right VJP split into each output element's contribution shows an element read by
  several outputs (a repeated index, overlapping windows, a mirrored pad) that kept one
  or some contributions instead of their sum (`not_accumulated`);
* the kernel flipped along its spatial axes shows a convolution's orientation (`flipped`),
  the input padded by its pads a padding never cropped or cropped off-centre
  (`uncropped`), one zero in every slice of a `prod` its gradient at x == 0
  (`prod_zeros`);
* the right VJP with its axes permuted shows a layout read the wrong way (`permuted`).

A probe answers only when every probed element fits its mechanism; anything else is None,
and the next probe (in the end `formula`) decides.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...engines.driver import EngineFailure, Unsupported
from ...ops import ShapeError
from ...ops.broadcast import normalize_axes
from ...ops.conv_geometry import geometry as conv_geometry
from .findings import Finding
from .regions import describe
from .spikes import (
    MAX_SPIKES,
    POOLS,
    not_reversed,
    pool_spikes,
    right_spike,
    rolled,
)

if TYPE_CHECKING:
    from .probes import Prober

Probe = Callable[["Prober", int, np.ndarray, np.ndarray], "Finding | None"]

CONVS = frozenset({"conv1d", "conv2d", "conv2d_transpose"})
GATHERS = frozenset({"take", "take_along_axis", "embedding"})
# Where an element of the argument is read by several output elements, in each op's terms.
_SHARED = {
    **dict.fromkeys(GATHERS, "where an index repeats"),
    **dict.fromkeys(POOLS | CONVS, "where windows overlap"),
    "pad": "where the padding mirrors x",
}
# An element read by more output elements (windows) than a 3x3 kernel's is not searched
# for the contributions it kept (2**9 subsets at most).
MAX_READERS = 9


def find(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """The first window or index mechanism that fits the node's argument `arg`."""
    check = prober.check
    if check.check != "vjp" or check.node.part is not None or check.numeric_right:
        return None
    for probe in PROBES:
        try:
            finding = probe(prober, arg, want, got)
        except (EngineFailure, Unsupported, ShapeError):
            finding = None  # the engine cannot run the designed inputs: no evidence
        if finding is not None:
            return finding
    return None


def permuted(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """The right values with the axes in another order (a filter's HWIO read as OIHW)."""
    if want.shape == got.shape or sorted(want.shape) != sorted(got.shape) or want.ndim > 6:
        return None
    if _squeezed(want.shape) == _squeezed(got.shape):
        return None  # only size-1 axes moved: a reshape, the shape probe's
    for perm in itertools.permutations(range(want.ndim)):
        moved = np.transpose(want, perm)
        if moved.shape == got.shape and prober.check.same(moved, got):
            return Finding(
                "transposed",
                f"has the right values with its axes permuted as {list(perm)} "
                f"(shape {tuple(got.shape)} for {tuple(want.shape)}): a layout read the wrong way",
                f"lay the gradient out as the argument is: np.transpose(t, {_inverse(perm)})",
                axes=list(perm),
            )
    return None


def flipped(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """A convolution's rule with its kernel turned round along the spatial axes."""
    check = prober.check
    op = check.node.op
    if op.name not in CONVS or want.shape != got.shape or "a1" not in check.inputs:
        return None
    axes = _filter_spatial(op.name, check.node.attrs, check.inputs["a1"].ndim)
    if arg == 0:
        inputs = {**check.inputs, "a1": np.flip(check.inputs["a1"], axes).copy()}
        turned = check.right(check.cotangent, inputs).grads["a0"]
        says = "uses the kernel turned round: it is the right VJP with the kernel flipped"
    else:
        turned = np.flip(want, axes)
        says = "is the right filter gradient turned round"
    if check.same(want, turned) or not check.same(turned, got):
        return None
    return Finding(
        "flipped",
        f"{says} along its spatial axes {list(axes)} (a convolution, where the forward pass "
        "is a cross-correlation)",
        "keep the kernel's orientation of the forward pass, a cross-correlation: do not flip "
        f"the kernel along axes {list(axes)} in this rule (or flip it back)",
    )


def uncropped(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """A convolution's input gradient taken from the padded input's gradient uncropped, or
    cropped at the wrong offset (shifted by the pad)."""
    check = prober.check
    op, attrs = check.node.op, check.node.attrs
    if op.name not in ("conv1d", "conv2d") or arg != 0:
        return None
    x, w = check.inputs["a0"], check.inputs["a1"]
    rank = x.ndim - 2
    geo = conv_geometry(rank, x.shape, w.shape, **attrs)
    if not any(map(any, geo.pads)):
        return None
    first = 2 if attrs["data_format"].startswith("NC") else 1
    width = [(0, 0)] * x.ndim
    for a, pad in enumerate(geo.pads):
        width[first + a] = pad
    # The right gradient of the padded input: the same convolution, VALID, on x padded.
    full = op.vjps[0](check.cotangent, None, np.pad(x, width), w, **{**attrs, "padding": "VALID"})
    if got.shape == full.shape and check.same(full, got):
        return Finding(
            "shape",
            f"is the gradient of the padded input, shape {tuple(full.shape)}: the padding "
            "was never cropped",
            f"crop the pad away: keep x's part of the padded gradient (pads {list(geo.pads)})",
        )
    if got.shape != want.shape:
        return None
    spans = [range(sum(pad) + 1) for pad in geo.pads]
    for offsets in itertools.product(*spans):
        if list(offsets) == [before for before, _ in geo.pads]:
            continue
        crop = [slice(None)] * x.ndim
        for a, o in enumerate(offsets):
            crop[first + a] = slice(o, o + x.shape[first + a])
        if check.same(full[tuple(crop)], got):
            return Finding(
                "shifted",
                f"is the padded input's gradient cropped at offsets {list(offsets)} of the "
                f"spatial axes, where the pads before them are "
                f"{[before for before, _ in geo.pads]}: shifted by the pad",
                "crop from the pad before each spatial axis (TensorFlow's SAME puts the odd "
                "element of padding after)",
            )
    return None


def not_accumulated(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """Where several output elements read one element, the engine kept some of their
    contributions (one: an overwrite) instead of adding them all."""
    check = prober.check
    region = _SHARED.get(check.node.op.name)
    g = check.cotangent
    if region is None or want.shape != got.shape or g.size > MAX_SPIKES:
        return None
    parts = np.stack([g[k] * right_spike(check, arg, k) for k in np.ndindex(g.shape)])
    if check.node.op.name in CONVS:  # a window is one place's output channels together
        parts = parts.reshape(*g.shape, *want.shape)
        parts = parts.sum(axis=_channel_axis(check.node.attrs, g.ndim)).reshape(-1, *want.shape)
    readers = np.count_nonzero(parts, axis=0)
    wrong = ~check.close(want, got)
    if not wrong.any() or (readers[wrong] < 2).any() or readers.max() > MAX_READERS:
        return None
    columns = parts.reshape(len(parts), -1).T  # each element's contributions
    kept = []
    for i in np.flatnonzero(wrong):
        count = _kept(check, columns[i][columns[i] != 0], got.flat[i])
        if count is None:
            return None  # an element no subset of its contributions explains
        kept.append(count)
    first = tuple(int(i) for i in np.argwhere(wrong)[0])
    one = all(k == 1 for k in kept)
    if check.node.op.name == "pad":
        says = (
            "never folds the mirrored parts back" if one else "folds back only some mirrored parts"
        )
        fix = "add each padded element's gradient to the element of x it mirrors"
    else:
        says = "overwrites instead of adding" if one else "adds only some of them"
        fix = (
            "add every contribution: `np.add.at(z, index, g)` accumulates where plain "
            "assignment or `z[index] += g` (buffered) keeps the last one"
        )
    which = "one contribution" if one else "only some of the contributions"
    return Finding(
        "not-accumulated",
        f"keeps {which} {region}, where the right VJP adds them all: it {says} (at {first}: "
        f"{int(readers[first])} contributions, {kept[0]} kept; {np.count_nonzero(wrong)} "
        "elements are wrong)",
        fix,
        region=region,
    )


def _kept(check, parts: np.ndarray, got) -> int | None:
    """How many of an element's contributions `parts` add up to `got`, the fewest that do
    (a proper subset only); None if no subset does."""
    for size in range(1, len(parts)):
        for subset in itertools.combinations(parts, size):
            if check.close(np.asarray(sum(subset)), np.asarray(got)):
                return size
    return None


def prod_zeros(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """prod's gradient at a zero, on an input with exactly one zero in every reduced slice:
    there the right gradient is the product of the others, and nothing else is zero."""
    check = prober.check
    if check.node.op.name != "prod" or want.shape != got.shape:
        return None
    x = check.inputs["a0"]
    if not (check.close(want, got) | (x == 0)).all():
        return None  # wrong away from the zeros too
    axes = normalize_axes(check.node.attrs["axis"], x.ndim)
    zero = np.zeros(x.shape, bool)
    zero[tuple(0 if a in axes else slice(None) for a in range(x.ndim))] = True
    designed = {**check.inputs, "a0": np.where(zero, 0, np.where(x == 0, 1.5, x)).astype(x.dtype)}
    there = check.run(check.engine_factory, check.cotangent, designed).grads["a0"]
    right = check.right(check.cotangent, designed).grads["a0"]
    if not np.array_equal(~check.close(right, there), zero):
        return None  # right at the zeros, or wrong elsewhere: not this
    if (there[zero] == 0).all():
        mechanism, gives = "zero", "zero"
    elif not np.isfinite(there[zero]).any():
        mechanism, gives = "nan-region", "NaN/Inf"
    else:
        return None
    region = describe(zero, check.node, designed)
    return Finding(
        mechanism,
        f"gives {gives} where {region}, where the right VJP is the product of the other "
        "elements of the slice (seen on an input with one zero in every slice; right "
        "elsewhere)",
        "do not divide the product by x: multiply g by the product of the others "
        "(np.prod of x with that element left out, or cumulative products from both ends)",
        region=region,
    )


# In order: the first that fits is the mechanism.
PROBES: tuple[Probe, ...] = (
    permuted, flipped, uncropped, not_accumulated, pool_spikes, rolled, not_reversed, prod_zeros
)  # fmt: skip


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def _inverse(perm: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.argsort(perm)]


def _filter_spatial(op: str, attrs: dict, ndim: int) -> tuple[int, ...]:
    """The kernel's spatial axes in its layout: HWIO/WIO and conv2d_transpose's HW-first
    filter lead with them, PyTorch's OIHW/OIW ends with them."""
    rank = ndim - 2
    if op != "conv2d_transpose" and str(attrs.get("filter_format", "")).startswith("O"):
        return tuple(range(2, ndim))
    return tuple(range(rank))


def _channel_axis(attrs: dict, ndim: int) -> int:
    """The output's channel axis: last unless the data format puts it first (NCHW)."""
    return 1 if str(attrs.get("data_format", "")).startswith("NC") else ndim - 1
