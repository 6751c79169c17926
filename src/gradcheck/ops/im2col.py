"""Convolution by im2col, in one canonical layout, as three ops that are each other's adjoints.

Every convolution of ops/conv.py (conv1d, conv2d, conv2d_transpose, any data or filter
format) is computed here in one layout: x channels last, ``(N, *spatial, C)``, the filter
``(*kernel, C // groups, O)``, with explicit ``pads`` (one ``(before, after)`` pair per
spatial axis), ``strides``, ``dilations`` and ``groups``, for one or two spatial axes.

* `CONV` is the convolution (TensorFlow's cross-correlation). Its windows are a strided
  view of the padded input (``as_strided``: no copy), ``(N, *out, *kernel, C)``, contracted
  with the filter by `tensordot` (``einsum`` with groups): no Python loop over pixels.
* `CONV_INPUT_GRAD` is its adjoint in x (``conv2d_transpose`` is this op): the cotangent
  times the filter gives every window's share, added back into the padded input one kernel
  tap at a time (a loop over the taps, each a strided slice of all the windows).
* `CONV_FILTER_GRAD` is its adjoint in the filter: the windows contracted with the
  cotangent over the batch and the output pixels.

The three are bilinear and each one's VJPs and JVPs are calls of the others, so the
builtin engine's second order records them as ops (see `registry`'s docstring). The
windows of a batch are expanded a few examples at a time, so that the expansion held at
once stays near the size of the op's input and output (`_batches`); `expansion` is the
whole of it, what a case's element cap counts.
"""

from __future__ import annotations

import math
from typing import Any

from ..util.lazy_numpy import np
from .registry import Op


def out_size(size: int, kernel: int, stride: int, dilation: int, pad: tuple[int, int]) -> int:
    """Output positions along one axis: how many strided windows fit in the padded size."""
    return (size + pad[0] + pad[1] - (kernel - 1) * dilation - 1) // stride + 1


def expansion(x: tuple, w: tuple, strides, pads, dilations) -> int:
    """Elements of the whole im2col expansion: every output pixel's window of x."""
    rank = len(x) - 2
    out = [out_size(x[1 + a], w[a], strides[a], dilations[a], pads[a]) for a in range(rank)]
    return x[0] * math.prod(out) * math.prod(w[:rank]) * x[-1]


def _windows(xp, kernel, strides, dilations, out):
    """The windows of the padded input, a read-only view (N, *out, *kernel, C)."""
    n, *spatial, c = xp.strides
    steps = [s * st for s, st in zip(spatial, strides, strict=True)]
    taps = [s * d for s, d in zip(spatial, dilations, strict=True)]
    shape = (xp.shape[0], *out, *kernel, xp.shape[-1])
    return np.lib.stride_tricks.as_strided(xp, shape, (n, *steps, *taps, c), writeable=False)


def _pad(x, pads):
    if not any(p for pair in pads for p in pair):
        return x
    return np.pad(x, [(0, 0), *pads, (0, 0)])


def _batches(n: int, per_example: int, budget: int) -> list[slice]:
    """Slices of the batch whose expansion (`per_example` elements each) fits `budget`."""
    step = max(1, budget // max(per_example, 1))
    return [slice(i, i + step) for i in range(0, n, step)]


def _letters(rank: int) -> tuple[str, str]:
    """Einsum letters for the output pixels and the kernel taps."""
    return "hw"[:rank], "ij"[:rank]


def _out(x_shape, kernel, strides, pads, dilations) -> list[int]:
    rank = len(kernel)
    return [
        out_size(x_shape[1 + a], kernel[a], strides[a], dilations[a], pads[a]) for a in range(rank)
    ]


def _conv(x, w, strides, pads, dilations, groups):
    rank = x.ndim - 2
    kernel, o = w.shape[:rank], w.shape[-1]
    out = _out(x.shape, kernel, strides, pads, dilations)
    xp = _pad(x, pads)
    cols = _windows(xp, kernel, strides, dilations, out)
    y = np.empty((x.shape[0], *out, o), np.result_type(x, w))
    per = math.prod(out) * math.prod(kernel) * x.shape[-1]
    p, k = _letters(rank)
    for part in _batches(x.shape[0], per, x.size + y.size):
        chunk = cols[part]
        if groups == 1:
            y[part] = np.tensordot(chunk, w, axes=(range(1 + rank, 2 + 2 * rank), range(rank + 1)))
            continue
        chunk = chunk.reshape((*chunk.shape[:-1], groups, -1))
        wg = w.reshape((*kernel, w.shape[-2], groups, -1))
        got = np.einsum(f"n{p}{k}gc,{k}cgo->n{p}go", chunk, wg, optimize=True)
        y[part] = got.reshape((*got.shape[: 1 + rank], o))
    return y


def _input_grad(g, w, x_shape, strides, pads, dilations, groups):
    rank = g.ndim - 2
    kernel, out = w.shape[:rank], g.shape[1 : 1 + rank]
    c = x_shape[-1]
    padded = [x_shape[1 + a] + pads[a][0] + pads[a][1] for a in range(rank)]
    xp = np.zeros((g.shape[0], *padded, c), np.result_type(g, w))
    p, k = _letters(rank)
    per = math.prod(out) * math.prod(kernel) * c
    for part in _batches(g.shape[0], per, g.size + math.prod(x_shape)):
        if groups == 1:  # every window's share: (n, *out, *kernel, C)
            cols = np.tensordot(g[part], w, axes=([rank + 1], [rank + 1]))
        else:
            gg = g[part].reshape((*g[part].shape[:-1], groups, -1))
            wg = w.reshape((*kernel, w.shape[-2], groups, -1))
            cols = np.einsum(f"n{p}go,{k}cgo->n{p}{k}gc", gg, wg, optimize=True)
            cols = cols.reshape((*cols.shape[:-2], c))
        for tap in np.ndindex(*kernel):  # each tap's shares land on a strided slice
            at = tuple(
                slice(t * d, t * d + (n - 1) * s + 1, s)
                for t, d, n, s in zip(tap, dilations, out, strides, strict=True)
            )
            xp[(part, *at)] += cols[(slice(None),) * (1 + rank) + tap]
    inner = tuple(slice(pads[a][0], pads[a][0] + x_shape[1 + a]) for a in range(rank))
    return xp[(slice(None), *inner)]


def _filter_grad(x, g, w_shape, strides, pads, dilations, groups):
    rank = x.ndim - 2
    kernel, out = tuple(w_shape[:rank]), g.shape[1 : 1 + rank]
    cols = _windows(_pad(x, pads), kernel, strides, dilations, out)
    gw = np.zeros(w_shape, np.result_type(x, g))
    p, k = _letters(rank)
    per = math.prod(out) * math.prod(kernel) * x.shape[-1]
    for part in _batches(x.shape[0], per, x.size + g.size):
        if groups == 1:
            axes = list(range(rank + 1))
            gw += np.tensordot(cols[part], g[part], axes=(axes, axes))
            continue
        chunk = cols[part].reshape((*cols[part].shape[:-1], groups, -1))
        gg = g[part].reshape((*g[part].shape[:-1], groups, -1))
        got = np.einsum(f"n{p}{k}gc,n{p}go->{k}cgo", chunk, gg, optimize=True)
        gw += got.reshape(w_shape)
    return gw


_GEOMETRY: dict[str, Any] = {"strides": (1,), "pads": ((0, 0),), "dilations": (1,), "groups": 1}


def _geometry(attrs: dict[str, Any]) -> dict[str, Any]:
    return {name: attrs[name] for name in _GEOMETRY}


# fmt: off
CONV = Op(
    name="conv", params=("x", "w"), attrs=_GEOMETRY,
    shape=lambda x, w, **a: x, forward=_conv,
    vjps=(lambda g, ans, x, w, **a: CONV_INPUT_GRAD(g, w, x_shape=tuple(x.shape), **a),
          lambda g, ans, x, w, **a: CONV_FILTER_GRAD(x, g, w_shape=tuple(w.shape), **a)),
    jvps=(lambda t, ans, x, w, **a: CONV(t, w, **a), lambda t, ans, x, w, **a: CONV(x, t, **a)),
    doc="the convolution, channels last, filter (*kernel, C // groups, O)",
)
CONV_INPUT_GRAD = Op(
    name="conv_input_grad", params=("g", "w"), attrs={**_GEOMETRY, "x_shape": ()},
    shape=lambda g, w, **a: a["x_shape"], forward=_input_grad,
    vjps=(lambda u, ans, g, w, x_shape, **a: CONV(u, w, **a),
          lambda u, ans, g, w, x_shape, **a: CONV_FILTER_GRAD(u, g, w_shape=tuple(w.shape), **a)),
    jvps=(lambda t, ans, g, w, **a: CONV_INPUT_GRAD(t, w, **a),
          lambda t, ans, g, w, **a: CONV_INPUT_GRAD(g, t, **a)),
    doc="conv's adjoint in x: each window's share of g added back (conv2d_transpose)",
)
CONV_FILTER_GRAD = Op(
    name="conv_filter_grad", params=("x", "g"), attrs={**_GEOMETRY, "w_shape": ()},
    shape=lambda x, g, **a: a["w_shape"], forward=_filter_grad,
    vjps=(lambda v, ans, x, g, w_shape, **a: CONV_INPUT_GRAD(g, v, x_shape=tuple(x.shape), **a),
          lambda v, ans, x, g, w_shape, **a: CONV(x, v, **a)),
    jvps=(lambda t, ans, x, g, **a: CONV_FILTER_GRAD(t, g, **a),
          lambda t, ans, x, g, **a: CONV_FILTER_GRAD(x, t, **a)),
    doc="conv's adjoint in the filter: the windows of x contracted with g",
)
# fmt: on
