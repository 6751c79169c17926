"""Planted bugs of the windowed and indexed ops: each a subclass of the window engine
overriding one `_vjp_<op>`, written as an engine had it (not as the catalogue plants
it), for the catalogue's faults of those ops. Each is shown by a shipped case (the
registry in `__init__.py` says which); the convolution bugs are written for the layouts
and paddings of those cases, as the engines they stand for were.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

# gradcheck loads this file by path: make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from tape_engine import Shares
from window_engine import Engine as WindowEngine

from gradcheck.ops import get_op
from gradcheck.ops.conv import conv_backprop_filter, conv_backprop_input
from gradcheck.ops.conv_geometry import geometry
from gradcheck.ops.pool_geometry import geometry as pool_geometry

# -- helpers an engine would have: its own pads, spatial axes and window loop ------------


def _pads(x, w, attrs: dict[str, Any]) -> list[list[int]]:
    """The forward's padding as explicit [before, after] pairs, one per spatial axis."""
    return [list(p) for p in geometry(np.ndim(x) - 2, x.shape, w.shape, **attrs).pads]


def _spatial(x, data_format: str) -> tuple[int, ...]:
    first = 2 if data_format[1] == "C" else 1  # NCHW / NCW, else NHWC / NWC
    return tuple(range(first, first + np.ndim(x) - 2))


def _full_correlation(op: str, g, w, axes: tuple[int, ...], attrs: dict[str, Any]):
    """g padded by the kernel's size less one and correlated with w, its in and out
    channels swapped (channels last, HWIO/WIO, stride 1): the input gradient's formula
    without the kernel's reversal."""
    k = w.shape[: len(axes)]
    gp = np.pad(g, [(0, 0), *((n - 1, n - 1) for n in k), (0, 0)])
    return get_op(op).forward(gp, np.swapaxes(w, -1, -2), **attrs)


def _pool_back(g, x, rank: int, attrs: dict[str, Any], share, *, assign=False, fill=-np.inf):
    """dx window by window, row-major: `share(window, g_there, geo)` added into dx (or
    assigned), the padding (`fill`) cut off at the end."""
    geo = pool_geometry(x.shape, rank=rank, **attrs)
    width = [(0, 0)] * x.ndim
    for axis, pad in zip(geo.spatial, geo.pads, strict=True):
        width[axis] = pad
    xp = np.pad(x, width, constant_values=fill)
    dx = np.zeros(xp.shape)
    for at in np.ndindex(*geo.out):
        window, there = [slice(None)] * x.ndim, [slice(None)] * x.ndim
        for axis, i, k, s in zip(geo.spatial, at, geo.ksize, geo.strides, strict=True):
            window[axis], there[axis] = slice(i * s, i * s + k), slice(i, i + 1)
        part = share(xp[tuple(window)], g[tuple(there)], geo)
        if assign:
            dx[tuple(window)] = part
        else:
            dx[tuple(window)] += part
    crop = [slice(None)] * x.ndim
    for axis, (before, _) in zip(geo.spatial, geo.pads, strict=True):
        crop[axis] = slice(before, before + x.shape[axis])
    return dx[tuple(crop)]


def _first_max(window, geo):
    """1 at the window's first maximum in row-major order (np.argmax), else 0."""
    moved = np.moveaxis(window, geo.spatial, range(-len(geo.spatial), 0))
    flat = moved.reshape(*moved.shape[: -len(geo.spatial)], -1)
    hot = np.eye(flat.shape[-1])[np.argmax(flat, axis=-1)].reshape(moved.shape)
    return np.moveaxis(hot, range(-len(geo.spatial), 0), geo.spatial)


# -- conv1d and conv2d ---------------------------------------------------------------------


class Conv2dKernelNotFlipped(WindowEngine):
    """conv2d's input gradient as the full correlation of g with w, the kernel never
    rotated 180 degrees (stride 1, VALID, NHWC)."""

    def _vjp_conv2d(self, g, out, x, w, **attrs) -> Shares:
        dx = _full_correlation("conv2d", g, w, (1, 2), attrs)
        return dx, conv_backprop_filter(x, g, w.shape, **attrs)


class Conv1dKernelNotFlipped(WindowEngine):
    """conv1d's input gradient as the full correlation of g with w, the kernel never
    reversed (stride 1, VALID, NWC)."""

    def _vjp_conv1d(self, g, out, x, w, **attrs) -> Shares:
        dx = _full_correlation("conv1d", g, w, (1,), attrs)
        return dx, conv_backprop_filter(x, g, w.shape, **attrs)


def _undilated(g, x, w, attrs):
    """The input gradient from the backprop called with the forward's pads, stride 1."""
    return conv_backprop_input(
        g, w, x.shape, **{**attrs, "strides": 1, "padding": _pads(x, w, attrs)}
    )


class Conv2dStrideNotDilated(WindowEngine):
    """conv2d's input gradient computed with stride 1: g is never dilated by the stride."""

    def _vjp_conv2d(self, g, out, x, w, **attrs) -> Shares:
        return _undilated(g, x, w, attrs), conv_backprop_filter(x, g, w.shape, **attrs)


class Conv1dStrideNotDilated(WindowEngine):
    """conv1d's input gradient computed with stride 1: g is never dilated by the stride."""

    def _vjp_conv1d(self, g, out, x, w, **attrs) -> Shares:
        return _undilated(g, x, w, attrs), conv_backprop_filter(x, g, w.shape, **attrs)


def _cropped_from_start(g, x, w, attrs):
    """The padded input's gradient, cut to x's size from its start."""
    axes = _spatial(x, attrs["data_format"])
    padded, crop = list(x.shape), [slice(None)] * x.ndim
    for axis, (before, after) in zip(axes, _pads(x, w, attrs), strict=True):
        padded[axis] += before + after
        crop[axis] = slice(x.shape[axis])
    dxp = conv_backprop_input(g, w, padded, **{**attrs, "padding": "VALID"})
    return dxp[tuple(crop)]


class Conv2dCropFromStart(WindowEngine):
    """conv2d's padded input gradient cropped from its start, not after the pad."""

    def _vjp_conv2d(self, g, out, x, w, **attrs) -> Shares:
        return _cropped_from_start(g, x, w, attrs), conv_backprop_filter(x, g, w.shape, **attrs)


class Conv1dCropFromStart(WindowEngine):
    """conv1d's padded input gradient cropped from its start, not after the pad."""

    def _vjp_conv1d(self, g, out, x, w, **attrs) -> Shares:
        return _cropped_from_start(g, x, w, attrs), conv_backprop_filter(x, g, w.shape, **attrs)


def _pad_before(g, x, w, attrs) -> Shares:
    """Both gradients with SAME's odd pad before each axis, as PyTorch's padding='same'
    would be mistaken for TensorFlow's."""
    swapped = {**attrs, "padding": [[after, before] for before, after in _pads(x, w, attrs)]}
    return (
        conv_backprop_input(g, w, x.shape, **swapped),
        conv_backprop_filter(x, g, w.shape, **swapped),
    )


class Conv2dSamePadBefore(WindowEngine):
    """conv2d's gradients with SAME's odd padding element put before each axis."""

    def _vjp_conv2d(self, g, out, x, w, **attrs) -> Shares:
        return _pad_before(g, x, w, attrs)


class Conv1dSamePadBefore(WindowEngine):
    """conv1d's gradients with SAME's odd padding element put before the axis."""

    def _vjp_conv1d(self, g, out, x, w, **attrs) -> Shares:
        return _pad_before(g, x, w, attrs)


def _interleaved(g, x, w, attrs):
    """The filter gradient one group at a time, group k's channels x[..., k::groups]
    (channels last)."""
    k, o = attrs["groups"], w.shape[-1] // attrs["groups"]
    one = {**attrs, "groups": 1}
    parts = [
        conv_backprop_filter(x[..., i::k], g[..., i * o : (i + 1) * o], (*w.shape[:-1], o), **one)
        for i in range(k)
    ]
    return np.concatenate(parts, axis=-1)


class Conv2dGroupsInterleaved(WindowEngine):
    """conv2d's filter gradient takes group k's channels as k, k + groups, ..."""

    def _vjp_conv2d(self, g, out, x, w, **attrs) -> Shares:
        return conv_backprop_input(g, w, x.shape, **attrs), _interleaved(g, x, w, attrs)


class Conv1dGroupsInterleaved(WindowEngine):
    """conv1d's filter gradient takes group k's channels as k, k + groups, ..."""

    def _vjp_conv1d(self, g, out, x, w, **attrs) -> Shares:
        return conv_backprop_input(g, w, x.shape, **attrs), _interleaved(g, x, w, attrs)


def _reshaped(g, x, w, attrs):
    """The filter gradient computed channels last and reshaped to w's OIHW/OIW shape."""
    last = {"OIHW": "HWIO", "OIW": "WIO"}[attrs["filter_format"]]
    shape = (*w.shape[2:], w.shape[1], w.shape[0])
    return np.reshape(
        conv_backprop_filter(x, g, shape, **{**attrs, "filter_format": last}), w.shape
    )


class Conv2dFilterReshaped(WindowEngine):
    """conv2d's filter gradient computed as HWIO and reshaped, not transposed, to OIHW."""

    def _vjp_conv2d(self, g, out, x, w, **attrs) -> Shares:
        return conv_backprop_input(g, w, x.shape, **attrs), _reshaped(g, x, w, attrs)


class Conv1dFilterReshaped(WindowEngine):
    """conv1d's filter gradient computed as WIO and reshaped, not transposed, to OIW."""

    def _vjp_conv1d(self, g, out, x, w, **attrs) -> Shares:
        return conv_backprop_input(g, w, x.shape, **attrs), _reshaped(g, x, w, attrs)


class Conv2dTransposeSamePadBefore(WindowEngine):
    """conv2d_transpose's gradient for x, conv2d of g, with SAME's odd pad before."""

    def _vjp_conv2d_transpose(self, g, out, x, w, **attrs) -> Shares:
        shape, strides = attrs["output_shape"], attrs["strides"]
        o = geometry(2, shape, w.shape, strides, attrs["padding"], 1, 1, attrs["data_format"],
                     "HWIO", "the output")  # fmt: skip
        swapped = [[after, before] for before, after in o.pads]
        dx = get_op("conv2d").forward(g, w, strides=strides, padding=swapped, dilations=1,
                                      groups=1, data_format=attrs["data_format"],
                                      filter_format="HWIO")  # fmt: skip
        return dx, get_op("conv2d_transpose").vjps[1](g, out, x, w, **attrs)


# -- the pools ------------------------------------------------------------------------------


def _every_maximum(window, there, geo):
    return there * (window == np.max(window, axis=geo.spatial, keepdims=True))


class MaxPool2dAllMaxima(WindowEngine):
    """max_pool2d's gradient goes to every element equal to its window's maximum."""

    def _vjp_max_pool2d(self, g, out, x, **attrs) -> Shares:
        return (_pool_back(g, x, 2, attrs, _every_maximum),)


class MaxPool1dAllMaxima(WindowEngine):
    """max_pool1d's gradient goes to every element equal to its window's maximum."""

    def _vjp_max_pool1d(self, g, out, x, **attrs) -> Shares:
        return (_pool_back(g, x, 1, attrs, _every_maximum),)


def _at_first_max(window, there, geo):
    return there * _first_max(window, geo)


class MaxPool2dOverlapAssigned(WindowEngine):
    """max_pool2d's windows write their gradient with `dx[window] = ...`: where windows
    overlap, the last one's overwrites the others'."""

    def _vjp_max_pool2d(self, g, out, x, **attrs) -> Shares:
        return (_pool_back(g, x, 2, attrs, _at_first_max, assign=True),)


class MaxPool1dOverlapAssigned(WindowEngine):
    """max_pool1d's windows write their gradient with `dx[window] = ...`: where windows
    overlap, the last one's overwrites the others'."""

    def _vjp_max_pool1d(self, g, out, x, **attrs) -> Shares:
        return (_pool_back(g, x, 1, attrs, _at_first_max, assign=True),)


def _over_full_window(window, there, geo):
    return np.broadcast_to(there / np.prod(geo.ksize), window.shape)


class AvgPool2dFullWindow(WindowEngine):
    """avg_pool2d's gradient divided by the whole window, SAME's padding counted in."""

    def _vjp_avg_pool2d(self, g, out, x, **attrs) -> Shares:
        return (_pool_back(g, x, 2, attrs, _over_full_window, fill=0.0),)


class AvgPool1dFullWindow(WindowEngine):
    """avg_pool1d's gradient divided by the whole window, SAME's padding counted in."""

    def _vjp_avg_pool1d(self, g, out, x, **attrs) -> Shares:
        return (_pool_back(g, x, 1, attrs, _over_full_window, fill=0.0),)


# -- gathers, products, running sums, flip and roll ----------------------------------------


class TakeOverwrite(WindowEngine):
    """take's gradient added by a buffered fancy assignment, `z[..., indices] += g`: a
    repeated index keeps one share (HIPS/autograd#39)."""

    def _vjp_take(self, g, out, x, *, indices, axis) -> Shares:
        z = np.zeros_like(x)
        z[(slice(None),) * (axis % x.ndim) + (indices,)] += g
        return (z,)


class TakeAlongAxisOverwrite(WindowEngine):
    """take_along_axis's gradient put back by np.put_along_axis, which assigns: a
    repeated index keeps its last share."""

    def _vjp_take_along_axis(self, g, out, x, *, indices, axis) -> Shares:
        z = np.zeros_like(x)
        np.put_along_axis(z, indices, g, axis)
        return (z,)


class ProdDividesByX(WindowEngine):
    """prod's gradient as the product over each factor, `g * y / x`: NaN at zeros."""

    def _vjp_prod(self, g, out, x, *, axis, keepdims) -> Shares:
        axes = tuple(range(x.ndim)) if axis is None else np.atleast_1d(axis) % x.ndim
        if not keepdims:
            g, out = np.expand_dims(g, tuple(axes)), np.expand_dims(out, tuple(axes))
        return (g * out / x,)


class CumsumNotReversed(WindowEngine):
    """cumsum's gradient is cumsum of g again, in the forward's direction."""

    def _vjp_cumsum(self, g, out, x, **attrs) -> Shares:
        return (get_op("cumsum").forward(g, **attrs),)


class CumprodDividesByX(WindowEngine):
    """cumprod's gradient as TensorFlow computes it: the reverse cumsum of g * y over x."""

    def _vjp_cumprod(self, g, out, x, *, axis, exclusive, reverse) -> Shares:
        back = get_op("cumsum").forward(g * out, axis, exclusive, not reverse)
        return (back / x,)


class FlipNotFlipped(WindowEngine):
    """flip's gradient is the upstream gradient as it is, never flipped back."""

    def _vjp_flip(self, g, out, x, *, axis) -> Shares:
        return (g,)


class RollNotInverted(WindowEngine):
    """roll's gradient rolled by shift again instead of back by -shift."""

    def _vjp_roll(self, g, out, x, *, shift, axis) -> Shares:
        return (np.roll(g, shift, axis),)
