"""Faults of the windowed ops' rules: conv1d, conv2d, conv2d_transpose and the max and
average pools, 1-D and 2-D.

Each wrong rule is the right one (ops/conv.py's im2col adjoints, ops/pooling.py's window
weights) with the one thing an engine got wrong changed: the kernel not flipped, the
stride not dilated, the padding cropped from the wrong end or split the wrong way round,
the groups' channels interleaved, the filter's layout reshaped instead of transposed; a
pool's gradient sent to every maximum, overlapping windows assigned instead of added, an
average divided by the full window where SAME pads it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....ops.conv_geometry import Geometry, geometry, moved, relaid
from ....ops.im2col import CONV, CONV_FILTER_GRAD, CONV_INPUT_GRAD
from ....ops.pool_geometry import geometry as pool_geometry
from ....ops.pool_geometry import windows
from ....ops.pooling import _weights, pool_names
from ..rules import Fault

# -- conv1d and conv2d -------------------------------------------------------------------
# The rules take the rank from x (N, spatial..., C in some order): one rule for both ops.


def _conv(x, w, attrs: dict[str, Any]) -> Geometry:
    return geometry(np.ndim(x) - 2, tuple(np.shape(x)), tuple(np.shape(w)), **attrs)


def _input_grad(g, x, w, o: Geometry, wc=None, **changed):
    """The VJP for x in the im2col layout, with `wc` (the filter, channels last) or one
    of the geometry's attributes changed."""
    xc = moved(tuple(x.shape), o.x_perm)
    wc = relaid(w, o.w_perm) if wc is None else wc
    gx = CONV_INPUT_GRAD(relaid(g, o.x_perm), wc, x_shape=xc, **{**o.attrs, **changed})
    return relaid(gx, o.x_back)


def _filter_grad(g, x, w, o: Geometry, xc=None, **changed):
    """The VJP for w in the im2col layout (*kernel, in, out), not yet in w's layout."""
    xc = relaid(x, o.x_perm) if xc is None else xc
    wc = moved(tuple(w.shape), o.w_perm)
    return CONV_FILTER_GRAD(xc, relaid(g, o.x_perm), w_shape=wc, **{**o.attrs, **changed})


def unflipped_kernel(g, ans, x, w, **attrs):
    """x's gradient as a full correlation of g with w: the kernel is never rotated."""
    o = _conv(x, w, attrs)
    taps = (slice(None, None, -1),) * len(o.strides)
    return _input_grad(g, x, w, o, wc=relaid(w, o.w_perm)[taps])


def undilated_stride(g, ans, x, w, **attrs):
    """g's windows put back one element apart, as if the stride were 1."""
    o = _conv(x, w, attrs)
    return _input_grad(g, x, w, o, strides=(1,) * len(o.strides))


def cropped_from_start(g, ans, x, w, **attrs):
    """The padded input's gradient cut to x's size from its start, not after the pad."""
    o = _conv(x, w, attrs)
    xc = moved(tuple(x.shape), o.x_perm)
    spatial = xc[1:-1]
    padded = (xc[0], *(n + sum(p) for n, p in zip(spatial, o.pads, strict=True)), xc[-1])
    unpadded = {**o.attrs, "pads": ((0, 0),) * len(spatial)}
    gx = CONV_INPUT_GRAD(relaid(g, o.x_perm), relaid(w, o.w_perm), x_shape=padded, **unpadded)
    return relaid(gx[(slice(None), *(slice(n) for n in spatial))], o.x_back)


def _swapped(pads) -> tuple:
    return tuple((after, before) for before, after in pads)


def swapped_pads_x(g, ans, x, w, **attrs):
    o = _conv(x, w, attrs)
    return _input_grad(g, x, w, o, pads=_swapped(o.pads))


def swapped_pads_w(g, ans, x, w, **attrs):
    o = _conv(x, w, attrs)
    return relaid(_filter_grad(g, x, w, o, pads=_swapped(o.pads)), o.w_back)


def interleaved_groups(g, ans, x, w, **attrs):
    """Group k's input channels taken as k, k + groups, ... instead of one block each."""
    o = _conv(x, w, attrs)
    xc = relaid(x, o.x_perm)
    c = xc.shape[-1]
    order = np.arange(c).reshape(c // o.groups, o.groups).T.ravel()
    return relaid(_filter_grad(g, x, w, o, xc=xc[..., order]), o.w_back)


def reshaped_filter(g, ans, x, w, **attrs):
    """The channels-last filter gradient reshaped to w's shape instead of transposed."""
    o = _conv(x, w, attrs)
    return np.reshape(_filter_grad(g, x, w, o), np.shape(w))


def _conv_faults(op: str, flipped: str, last: str, first: str, back: str) -> tuple[Fault, ...]:
    """conv1d's or conv2d's faults: `flipped` the kernel rotated in the channels-last
    layout `last`, `back` the transpose from it to the channels-first filter `first`."""
    return (
        Fault(
            f"{op}.kernel-not-flipped",
            f"{op}'s VJP for x correlates the upstream gradient with the kernel as it is: the "
            "input gradient is a full convolution, with the kernel's spatial axes reversed",
            "reverse the kernel's spatial axes: `conv_backprop_input(g, w, ...)` is the full "
            f"correlation of g with `{flipped}` ({last}), not with w",
            vjps={(op, 0): unflipped_kernel},
            seen="nntrainer/nntrainer#705",
        ),
        Fault(
            f"{op}.stride-not-dilated",
            f"{op}'s VJP for x puts the upstream gradient's windows back one element apart: "
            "with strides > 1, g must be dilated by the stride (zeros between its elements)",
            "dilate g by the strides before the full convolution: output i's window starts "
            "at `i * strides`, as `conv_backprop_input(g, w, x.shape, strides, ...)` places it",
            vjps={(op, 0): undilated_stride},
            seen="yonghenglh6/DepthwiseConvolution#20",
        ),
        Fault(
            f"{op}.crop-from-start",
            f"{op}'s VJP for x crops the padded input's gradient from its start: the padding "
            "before each spatial axis must be cut off, not the end of the array",
            "crop the pads: `gx_padded[:, pad_before:pad_before + n]` along each spatial axis",
            vjps={(op, 0): cropped_from_start},
            seen="data61/MP-SPDZ#1206",
        ),
        Fault(
            f"{op}.same-pad-before",
            f"{op}'s VJPs put SAME's odd padding element before each spatial axis: "
            "TensorFlow puts it after (pad_before = total // 2)",
            "split SAME's total pad as TensorFlow does: `(total // 2, total - total // 2)`",
            vjps={(op, 0): swapped_pads_x, (op, 1): swapped_pads_w},
            seen="meta-pytorch/opacus#451",
        ),
        Fault(
            f"{op}.groups-interleaved",
            f"{op}'s VJP for w takes group k's input channels as every groups-th channel "
            "(k, k + groups, ...) instead of the k-th block of C // groups channels",
            "split the channels in blocks: `x[..., k * C // groups:(k + 1) * C // groups]` "
            "is group k's",
            vjps={(op, 1): interleaved_groups},
            seen="pytorch/pytorch#51430",
        ),
        Fault(
            f"{op}.filter-reshaped",
            f"{op}'s VJP for w computes the gradient as {last} and reshapes it to {first}: "
            "the axes must be transposed, not reshaped",
            f"transpose the filter gradient to w's layout: `np.transpose(gw, {back})` for {first}",
            vjps={(op, 1): reshaped_filter},
            seen="nntrainer/nntrainer#705",
        ),
    )


# -- conv2d_transpose --------------------------------------------------------------------


def transpose_swapped_pads(g, ans, x, w, output_shape, strides, padding, data_format):
    """conv2d_transpose's VJP for x, a conv2d of g, with SAME's odd pad put before."""
    o = geometry(2, tuple(output_shape), tuple(w.shape), strides, padding, 1, 1, data_format,
                 "HWIO", "the output")  # fmt: skip
    attrs = {**o.attrs, "pads": _swapped(o.pads)}
    return relaid(CONV(relaid(g, o.x_perm), w, **attrs), o.x_back)


# -- the max and average pools ------------------------------------------------------------
# As the convolutions' rules, the pools' take the rank from x: one rule for 1-D and 2-D.


def _rank(x) -> int:
    return np.ndim(x) - 2


def _scatter(shares, x, attrs: dict[str, Any], *, add: bool = True):
    """Each window's shares put back where the window sits: added (np.add.at), or
    assigned window by window in row-major order (`dx[window] = share`), so that where
    windows overlap the last one wins."""
    names = pool_names(x, rank=_rank(x), **attrs)
    z = np.zeros(np.pad(x, names["pad_width"]).shape, shares.dtype)
    view = np.lib.stride_tricks.sliding_window_view(
        z, names["ksize"], names["spatial"], writeable=True
    )[names["strided"]]
    if add:
        np.add.at(view, (), shares)
    else:
        out = [view.shape[axis] for axis in names["spatial"]]
        for at in np.ndindex(*out):  # one window at a time: the order decides who wins
            window = [slice(None)] * x.ndim
            for axis, i in zip(names["spatial"], at, strict=True):
                window[axis] = i
            view[tuple(window)] = shares[tuple(window)]
    return z[names["unpadded"]]


def _spread(g, x):
    """Each window's cotangent against its elements: g with the window's axes."""
    return np.asarray(g)[(..., *(None,) * _rank(x))]


def max_all_maxima(g, ans, x, **attrs):
    hit = windows(x, pool_geometry(x.shape, rank=_rank(x), **attrs), -np.inf) == _spread(ans, x)
    return _scatter(_spread(g, x) * hit, x, attrs)


def max_assigned(g, ans, x, **attrs):
    first = _weights(x, "max", pool_geometry(x.shape, rank=_rank(x), **attrs))
    return _scatter(_spread(g, x) * first, x, attrs, add=False)


def avg_full_window(g, ans, x, **attrs):
    ksize = pool_names(x, rank=_rank(x), **attrs)["ksize"]
    return _scatter(_spread(g, x) * np.full(ksize, 1 / np.prod(ksize)), x, attrs)


def _pool_faults(rank: int) -> tuple[Fault, ...]:
    axes = tuple(range(-rank, 0))  # the window's axes, last
    return (
        Fault(
            f"max_pool{rank}d.all-maxima",
            f"max_pool{rank}d's VJP gives a window's whole gradient to every element tied "
            "for its maximum: TensorFlow gives it to the first maximum only",
            "mask the first maximum of each window: `hit & (np.cumsum(hit, -1) == 1)` over "
            "the flattened window",
            vjps={(f"max_pool{rank}d", 0): max_all_maxima},
            seen="Theano/Theano#5248",
        ),
        Fault(
            f"max_pool{rank}d.overlap-assigned",
            f"max_pool{rank}d's VJP assigns each window's gradient where overlapping windows "
            "share an element, so the last window wins: the shares must be added",
            "accumulate the windows' shares: `np.add.at(view, (), shares)`, not "
            "`view[...] = shares`",
            vjps={(f"max_pool{rank}d", 0): max_assigned},
            seen="ahrefs/ocannl#512",
        ),
        Fault(
            f"avg_pool{rank}d.full-window",
            f"avg_pool{rank}d's VJP divides by the full window size where SAME padding cuts a "
            "window short: TensorFlow averages over the in-bounds elements only",
            "divide by each window's in-bounds count: `n = np.sum(windows(np.ones_like(x)), "
            f"{axes})`, not `np.prod(ksize)`",
            vjps={(f"avg_pool{rank}d", 0): avg_full_window},
            seen="tracel-ai/burn#5604",
        ),
    )


FAULTS: tuple[Fault, ...] = (
    *_conv_faults("conv2d", "w[::-1, ::-1]", "HWIO", "OIHW", "(3, 2, 0, 1)"),
    *_conv_faults("conv1d", "w[::-1]", "WIO", "OIW", "(2, 1, 0)"),
    Fault(
        "conv2d_transpose.same-pad-before",
        "conv2d_transpose's VJP for x (a conv2d of g) puts SAME's odd padding element "
        "before each spatial axis: TensorFlow puts it after",
        "split SAME's total pad as TensorFlow does: `(total // 2, total - total // 2)`, "
        "the pads of `conv2d(g, w, strides, padding)`",
        vjps={("conv2d_transpose", 0): transpose_swapped_pads},
        seen="robertknight/rten#1399",
    ),
    *_pool_faults(2),
    *_pool_faults(1),
)
