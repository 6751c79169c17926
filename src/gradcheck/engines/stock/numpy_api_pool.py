"""Pooling, normalisation, the soft-label loss and one_hot (SPEC §3.1) the NumPy way, for
the engines with a NumPy-compatible module (`NumpyApiOps`): JAX replaces the pools with
``lax.reduce_window``; HIPS autograd, which has no strided windows, keeps these.

A pool's windows are gathered by integer-array indexing along each spatial axis (whose VJP
adds up where windows overlap), the positions TensorFlow's ``'SAME'`` pads masked: -inf for
a max, left out of an average's count. The max over each window is the module's own
``max``, which splits a tie among the tied elements (convention ``split``).
"""

from __future__ import annotations

import numpy as np

from ...ops.pool_geometry import geometry


class NumpyApiPoolOps:
    def _pool(self, kind, x, ksize, strides, padding, data_format, rank):
        xp = self.xp
        geo = geometry(tuple(xp.shape(x)), ksize, strides, padding, data_format, rank)
        valids, window_axes = [], []
        for i, (axis, k, s, (before, _), o) in enumerate(
            zip(geo.spatial, geo.ksize, geo.strides, geo.pads, geo.out, strict=True)
        ):
            at = axis + i  # each earlier spatial axis became two (output, window)
            n = xp.shape(x)[at]
            index = np.arange(o)[:, None] * s + np.arange(k)[None, :] - before
            x = x[(slice(None),) * at + (np.clip(index, 0, n - 1),)]
            valids.append((at, (index >= 0) & (index < n)))
            window_axes.append(at + 1)
        ndim = xp.ndim(x)
        inside = np.ones((1,) * ndim, bool)
        for at, valid in valids:
            inside = inside & valid.reshape([*(1,) * at, *valid.shape, *(1,) * (ndim - at - 2)])
        inside = np.broadcast_to(inside, xp.shape(x))
        axes = tuple(window_axes)
        if kind == "max":
            return xp.max(xp.where(inside, x, -np.inf), axis=axes)
        count = np.sum(inside, axis=axes)
        return xp.sum(xp.where(inside, x, 0.0), axis=axes) / count.astype(x.dtype)

    def max_pool2d(self, x, ksize=None, strides=None, padding="VALID", data_format="NHWC"):
        return self._pool("max", x, ksize, strides, padding, data_format, 2)

    def avg_pool2d(self, x, ksize=None, strides=None, padding="VALID", data_format="NHWC"):
        return self._pool("avg", x, ksize, strides, padding, data_format, 2)

    def max_pool1d(self, x, ksize=None, strides=None, padding="VALID", data_format="NWC"):
        return self._pool("max", x, ksize, strides, padding, data_format, 1)

    def avg_pool1d(self, x, ksize=None, strides=None, padding="VALID", data_format="NWC"):
        return self._pool("avg", x, ksize, strides, padding, data_format, 1)

    def layer_norm(self, x, axis=-1, epsilon=1e-5):
        xp = self.xp
        axes = tuple(axis) if isinstance(axis, list) else axis
        centred = x - xp.mean(x, axis=axes, keepdims=True)
        var = xp.mean(centred * centred, axis=axes, keepdims=True)
        return centred / xp.sqrt(var + epsilon)

    def batch_norm(self, x, axis=0, epsilon=1e-5):
        return self.layer_norm(x, axis, epsilon)

    def softmax_cross_entropy(self, logits, labels, axis=-1):
        return -self.xp.sum(labels * self.log_softmax(logits, axis=axis), axis=axis)

    def one_hot(self, indices, depth=None, dtype=None):
        hot = self.xp.equal(self.xp.expand_dims(indices, -1), np.arange(depth))
        return hot.astype(dtype or "float64")
