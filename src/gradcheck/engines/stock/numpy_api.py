"""The ops an engine with a NumPy-compatible module computes the NumPy way.

JAX (`jax.numpy`) and HIPS autograd (`autograd.numpy`) mirror NumPy's API, so their
adapters share these methods, each computed with the adapter's module `xp` (never NumPy
itself), and add what NumPy has no function for: sigmoid, relu, rsqrt, erf, the activations,
logsumexp, softmax and log_softmax, in the engine's own idiom.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .numpy_api_layout import NumpyApiLayoutOps
from .numpy_api_multi import NumpyApiMultiOps


def np_axis(axis: Any) -> Any:
    """An `axis` attribute as NumPy takes it: a list of axes becomes a tuple."""
    return tuple(axis) if isinstance(axis, list) else axis


class NumpyApiOps(NumpyApiLayoutOps, NumpyApiMultiOps):
    xp: Any  # the engine's NumPy-compatible module

    # -- elementwise -------------------------------------------------------------------
    def add(self, a, b):
        return self.xp.add(a, b)

    def sub(self, a, b):
        return self.xp.subtract(a, b)

    def mul(self, a, b):
        return self.xp.multiply(a, b)

    def div(self, a, b):
        return self.xp.divide(a, b)

    def pow(self, a, b):
        return self.xp.power(a, b)

    def maximum(self, a, b):
        return self.xp.maximum(a, b)

    def minimum(self, a, b):
        return self.xp.minimum(a, b)

    def neg(self, x):
        return self.xp.negative(x)

    def exp(self, x):
        return self.xp.exp(x)

    def log(self, x):
        return self.xp.log(x)

    def sqrt(self, x):
        return self.xp.sqrt(x)

    def abs(self, x):
        return self.xp.abs(x)

    def square(self, x):
        return self.xp.square(x)

    def sin(self, x):
        return self.xp.sin(x)

    def cos(self, x):
        return self.xp.cos(x)

    def tanh(self, x):
        return self.xp.tanh(x)

    def log1p(self, x):
        return self.xp.log1p(x)

    def expm1(self, x):
        return self.xp.expm1(x)

    def reciprocal(self, x):
        return self.xp.reciprocal(x)

    def tan(self, x):
        return self.xp.tan(x)

    def sign(self, x):
        return self.xp.sign(x)

    def floor(self, x):
        return self.xp.floor(x)

    def ceil(self, x):
        return self.xp.ceil(x)

    def round(self, x):
        return self.xp.round(x)

    # -- linear algebra, reductions ------------------------------------------------------
    def matmul(self, a, b):
        return self.xp.matmul(a, b)

    def dot(self, a, b):
        return self.xp.dot(a, b)

    def outer(self, a, b):
        return self.xp.outer(a, b)

    def trace(self, x):
        return self.xp.trace(x, axis1=-2, axis2=-1)

    def diag_part(self, x):
        return self.xp.diagonal(x, axis1=-2, axis2=-1)

    def sum(self, x, axis=None, keepdims=False):
        return self.xp.sum(x, axis=np_axis(axis), keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return self.xp.mean(x, axis=np_axis(axis), keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return self.xp.max(x, axis=np_axis(axis), keepdims=keepdims)

    def min(self, x, axis=None, keepdims=False):
        return self.xp.min(x, axis=np_axis(axis), keepdims=keepdims)

    def prod(self, x, axis=None, keepdims=False):
        return self.xp.prod(x, axis=np_axis(axis), keepdims=keepdims)

    def var(self, x, axis=None, keepdims=False):
        return self.xp.var(x, axis=np_axis(axis), keepdims=keepdims)

    def std(self, x, axis=None, keepdims=False):
        return self.xp.std(x, axis=np_axis(axis), keepdims=keepdims)

    def norm(self, x, ord=2, axis=None, keepdims=False):
        order = {"inf": np.inf}.get(ord, ord)
        if axis is None:  # TensorFlow's: the vector norm of every element
            flat = self.xp.linalg.norm(self.xp.reshape(x, (-1,)), ord=order)
            return self.xp.reshape(flat, (1,) * self.xp.ndim(x)) if keepdims else flat
        return self.xp.linalg.norm(x, ord=order, axis=np_axis(axis), keepdims=keepdims)

    def cumsum(self, x, axis=0, exclusive=False, reverse=False):
        return self._running(self.xp.cumsum, 0.0, x, axis, exclusive, reverse)

    def cumprod(self, x, axis=0, exclusive=False, reverse=False):
        return self._running(self.xp.cumprod, 1.0, x, axis, exclusive, reverse)

    def _running(self, running, identity, x, axis, exclusive, reverse):
        """TensorFlow's exclusive and reverse running sums and products: NumPy has the
        plain ones; reversed by a negative step, shifted by one with `identity`."""
        xp = self.xp
        at = (slice(None),) * (axis % xp.ndim(x))
        if reverse:
            x = x[(*at, slice(None, None, -1))]
        y = running(x, axis=axis)
        if exclusive:
            first = xp.ones_like(x[(*at, slice(0, 1))]) * identity
            y = xp.concatenate([first, y[(*at, slice(0, -1))]], axis=axis)
        return y[(*at, slice(None, None, -1))] if reverse else y

    # -- shape ---------------------------------------------------------------------------
    def reshape(self, x, shape):
        return self.xp.reshape(x, shape)

    def transpose(self, x, perm=None):
        return self.xp.transpose(x, perm)

    def matrix_transpose(self, x):
        return self.xp.swapaxes(x, -1, -2)

    def expand_dims(self, x, axis=0):
        return self.xp.expand_dims(x, axis)

    def squeeze(self, x, axis=None):
        if axis == []:  # TensorFlow: every size-1 axis
            axis = None
        return self.xp.squeeze(x, axis=np_axis(axis))

    def broadcast_to(self, x, shape):
        return self.xp.broadcast_to(x, shape)

    def concat(self, values, axis=0):
        return self.xp.concatenate(values, axis=axis)

    def stack(self, values, axis=0):
        return self.xp.stack(values, axis=axis)

    def getitem(self, x, index):
        return x[index]

    # -- gathers: integer indices (constants), by indexing, whose VJP adds up repeats ------
    def flip(self, x, axis=None):
        # By negative-step slices: HIPS autograd has no VJP for flip.
        index = [slice(None)] * self.xp.ndim(x)
        for a in [axis] if isinstance(axis, int) else axis:
            index[a] = slice(None, None, -1)
        return x[tuple(index)]

    def swapaxes(self, x, axis1=None, axis2=None):
        return self.xp.swapaxes(x, axis1, axis2)

    def take(self, x, indices, axis=0):
        return x[(slice(None),) * (axis % x.ndim) + (indices,)]

    def take_along_axis(self, x, indices, axis=-1):
        at, rank = axis % x.ndim, len(indices.shape)
        index = tuple(
            indices
            if a == at
            else self.xp.reshape(self.xp.arange(n), [-1 if b == a else 1 for b in range(rank)])
            for a, n in enumerate(indices.shape)
        )
        return x[index]

    def embedding(self, table, ids):
        return table[ids]

    def sparse_softmax_cross_entropy(self, logits, labels):
        log_p = self.log_softmax(logits, axis=-1)
        return -self.take_along_axis(log_p, labels[..., None], axis=-1)[..., 0]

    # -- comparisons (0/1 in the operands' dtype, no gradient), where, clip ----------------
    def greater(self, a, b):
        return self.xp.greater(a, b).astype(a.dtype)

    def greater_equal(self, a, b):
        return self.xp.greater_equal(a, b).astype(a.dtype)

    def less(self, a, b):
        return self.xp.less(a, b).astype(a.dtype)

    def less_equal(self, a, b):
        return self.xp.less_equal(a, b).astype(a.dtype)

    def equal(self, a, b):
        return self.xp.equal(a, b).astype(a.dtype)

    def not_equal(self, a, b):
        return self.xp.not_equal(a, b).astype(a.dtype)

    def where(self, cond, a, b):
        return self.xp.where(cond != 0, a, b)

    def clip(self, x, lo, hi):
        return self.xp.clip(x, lo, hi)
