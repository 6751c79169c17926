"""Convolutions (SPEC §3.1) the NumPy way, for the engines with a NumPy-compatible module
(`NumpyApiOps`: jax.numpy, HIPS autograd), written apart from gradcheck's im2col ops.

A convolution, channels last with a ``(*kernel, in, out)`` filter, is a sum over the
kernel's taps: the input's strided slice at that tap's (dilated) offset contracted with
that tap's ``(in, out)`` matrix (``tensordot``; ``einsum`` over the groups). Both
modules differentiate slices, concatenation and contractions, so nothing here needs a
VJP of its own. Pads are zeros concatenated on (HIPS autograd's ``pad`` has a narrow
VJP). conv2d_transpose is the convolution's adjoint by its definition: the input with
stride - 1 zeros between its elements, padded by kernel - 1 on both sides, convolved
with the spatially flipped filter (in and out swapped), then cut to the output
TensorFlow's pads leave (zeros after where the windows do not reach its end).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ...ops.conv_geometry import geometry, moved


class NumpyApiConvOps:
    xp: Any

    def _zeros_around(self, x, axis: int, before: int, after: int):
        if not (before or after):
            return x
        shape = list(self.xp.shape(x))

        def zeros(k: int):
            return np.zeros([*shape[:axis], k, *shape[axis + 1 :]], x.dtype)

        parts = [*([zeros(before)] if before else []), x, *([zeros(after)] if after else [])]
        return self.xp.concatenate(parts, axis=axis)

    def _correlate(self, x, w, strides, pads, dilations, groups):
        """x (N, *S, C), w (*K, C / groups, O): TensorFlow's convolution, channels last."""
        xp, rank = self.xp, len(strides)
        for a, (before, after) in enumerate(pads):
            x = self._zeros_around(x, 1 + a, before, after)
        kernel, sizes = xp.shape(w)[:rank], xp.shape(x)[1 : 1 + rank]
        out = [(n - (k - 1) * d - 1) // s + 1
               for n, k, s, d in zip(sizes, kernel, strides, dilations, strict=True)]  # fmt: skip
        n, c, o = xp.shape(x)[0], xp.shape(x)[-1], xp.shape(w)[-1]
        letters = "hw"[:rank] if rank == 2 else "w"
        total = None
        for tap in itertools.product(*map(range, kernel)):
            window = x[(slice(None),
                        *(slice(t * d, t * d + (m - 1) * s + 1, s)
                          for t, d, m, s in zip(tap, dilations, out, strides, strict=True)),
                        slice(None))]  # fmt: skip
            if groups == 1:
                term = xp.tensordot(window, w[tap], axes=([rank + 1], [0]))
            else:
                win = xp.reshape(window, [n, *out, groups, c // groups])
                taps = xp.reshape(w[tap], [c // groups, groups, o // groups])
                term = xp.einsum(f"n{letters}gc,cgo->n{letters}go", win, taps)
                term = xp.reshape(term, [n, *out, o])
            total = term if total is None else total + term
        return total

    def _conv(self, rank, x, w, strides, padding, dilations, groups, data_format, filter_format):
        xp = self.xp
        geo = geometry(rank, tuple(xp.shape(x)), tuple(xp.shape(w)), strides, padding,
                       dilations, groups, data_format, filter_format)  # fmt: skip
        x = x if geo.x_perm is None else xp.transpose(x, geo.x_perm)
        w = w if geo.w_perm is None else xp.transpose(w, geo.w_perm)
        y = self._correlate(x, w, geo.strides, geo.pads, geo.dilations, geo.groups)
        return y if geo.x_back is None else xp.transpose(y, geo.x_back)

    def conv1d(self, x, w, strides=1, padding="VALID", dilations=1, groups=1,
               data_format="NWC", filter_format="WIO"):  # fmt: skip
        return self._conv(1, x, w, strides, padding, dilations, groups, data_format,
                          filter_format)  # fmt: skip

    def conv2d(self, x, w, strides=1, padding="VALID", dilations=1, groups=1,
               data_format="NHWC", filter_format="HWIO"):  # fmt: skip
        return self._conv(2, x, w, strides, padding, dilations, groups, data_format,
                          filter_format)  # fmt: skip

    def conv2d_transpose(self, x, w, output_shape=None, strides=1, padding="SAME",
                         data_format="NHWC"):  # fmt: skip
        xp = self.xp
        out = tuple(int(v) for v in output_shape)
        geo = geometry(2, out, tuple(xp.shape(w)), strides, padding, 1, 1, data_format, "HWIO",
                       "the output")  # fmt: skip
        x = x if geo.x_perm is None else xp.transpose(x, geo.x_perm)
        kernel, sizes = xp.shape(w)[:2], moved(out, geo.x_perm)[1:3]
        for a, s in enumerate(geo.strides):  # stride - 1 zeros between elements
            if s > 1:
                shape = list(xp.shape(x))
                spread = xp.reshape(x, [*shape[: 2 + a], 1, *shape[2 + a :]])
                zeros = np.zeros([*shape[: 2 + a], s - 1, *shape[2 + a :]], x.dtype)
                joined = xp.concatenate([spread, zeros], axis=2 + a)
                x = xp.reshape(joined, [*shape[: 1 + a], shape[1 + a] * s, *shape[2 + a :]])
                x = x[(slice(None),) * (1 + a) + (slice(0, (shape[1 + a] - 1) * s + 1),)]
        flipped = xp.transpose(w[::-1, ::-1], (0, 1, 3, 2))  # (H, W, in, out)
        y = self._correlate(x, flipped, (1, 1), [(k - 1, k - 1) for k in kernel], (1, 1), 1)
        for a, ((before, _), size) in enumerate(zip(geo.pads, sizes, strict=True)):
            y = self._zeros_around(y, 1 + a, 0, max(before + size - xp.shape(y)[1 + a], 0))
            y = y[(slice(None),) * (1 + a) + (slice(before, before + size),)]
        return y if geo.x_back is None else xp.transpose(y, geo.x_back)
