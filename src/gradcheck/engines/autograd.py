"""``--engine autograd``: HIPS autograd, a functional engine (``autograd.make_vjp``), every
op written with ``autograd.numpy`` and ``autograd.scipy``.

Install with ``pip install 'gradcheck[autograd]'``. autograd computes in the dtype of the
NumPy arrays it is given, so every case dtype works as it is, except that NumPy has no
bfloat16 matmul: ml_dtypes computes it in float32, and the results say so.

Conventions at kinks and ties (SPEC §4 and §6.1), probed on autograd 1.9: relu is
``np.maximum(x, 0.0)``, as autograd code writes it, so relu'(0) = 1/2 (TensorFlow: 0);
abs'(0) = 0, as TensorFlow; max/min reductions split the gradient among ties, as
TensorFlow; ``maximum``/``minimum`` split a tie half and half (TensorFlow gives it to
``a``); the exponent's gradient of ``pow`` is NaN where the base is negative.

The main use is a custom op: subclass and add one method, e.g. an ``autograd.extend``
primitive with its ``defvjp`` for an op declared in an ``--ops`` file::

    class Engine(AutogradEngine):
        def softplus(self, x):
            return my_softplus(x)   # @primitive, with defvjp(my_softplus, ...)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import autograd
import autograd.numpy as anp
import numpy as np
from autograd.scipy.special import expit
from autograd.scipy.special import logsumexp as _logsumexp


def _axis(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, list) else axis


class AutogradEngine:
    name = "autograd"
    conventions: ClassVar[dict[str, str]] = {
        "relu": "half",
        "maximum": "split",
        "minimum": "split",
        "pow": "nan",
    }

    def vjp(
        self, fn: Callable[..., Any], primals: Sequence[np.ndarray], cotangent: np.ndarray
    ) -> list[np.ndarray]:
        pullback, _ = autograd.make_vjp(lambda args: fn(*args))(tuple(primals))
        return list(pullback(cotangent))

    # -- elementwise -------------------------------------------------------------------
    def add(self, a, b):
        return anp.add(a, b)

    def sub(self, a, b):
        return anp.subtract(a, b)

    def mul(self, a, b):
        return anp.multiply(a, b)

    def div(self, a, b):
        return anp.divide(a, b)

    def pow(self, a, b):
        return anp.power(a, b)

    def maximum(self, a, b):
        return anp.maximum(a, b)

    def minimum(self, a, b):
        return anp.minimum(a, b)

    def neg(self, x):
        return anp.negative(x)

    def exp(self, x):
        return anp.exp(x)

    def log(self, x):
        return anp.log(x)

    def sqrt(self, x):
        return anp.sqrt(x)

    def abs(self, x):
        return anp.abs(x)

    def square(self, x):
        return anp.square(x)

    def sin(self, x):
        return anp.sin(x)

    def cos(self, x):
        return anp.cos(x)

    def tanh(self, x):
        return anp.tanh(x)

    def sigmoid(self, x):
        return expit(x)

    def relu(self, x):
        return anp.maximum(x, 0.0)

    # -- linear algebra, reductions, nn --------------------------------------------------
    def matmul(self, a, b):
        return anp.matmul(a, b)

    def sum(self, x, axis=None, keepdims=False):
        return anp.sum(x, axis=_axis(axis), keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return anp.mean(x, axis=_axis(axis), keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return anp.max(x, axis=_axis(axis), keepdims=keepdims)

    def min(self, x, axis=None, keepdims=False):
        return anp.min(x, axis=_axis(axis), keepdims=keepdims)

    def logsumexp(self, x, axis=None, keepdims=False):
        return _logsumexp(x, axis=_axis(axis), keepdims=keepdims)

    def softmax(self, x, axis=-1):
        return anp.exp(x - _logsumexp(x, axis=axis, keepdims=True))

    def log_softmax(self, x, axis=-1):
        return x - _logsumexp(x, axis=axis, keepdims=True)

    # -- shape ---------------------------------------------------------------------------
    def reshape(self, x, shape):
        return anp.reshape(x, shape)

    def transpose(self, x, perm=None):
        return anp.transpose(x, perm)

    def matrix_transpose(self, x):
        return anp.swapaxes(x, -1, -2)

    def expand_dims(self, x, axis=0):
        return anp.expand_dims(x, axis)

    def squeeze(self, x, axis=None):
        if axis == []:  # TensorFlow: every size-1 axis
            axis = None
        return anp.squeeze(x, axis=_axis(axis))

    def broadcast_to(self, x, shape):
        # autograd's VJP of broadcast_to asserts "Can't handle extra leading dims": give
        # x the target's rank first (its leading size-1 axes broadcast like any other).
        lead = (1,) * (len(shape) - anp.ndim(x))
        return anp.broadcast_to(anp.reshape(x, lead + anp.shape(x)), tuple(shape))

    def concat(self, values, axis=0):
        return anp.concatenate(values, axis=axis)

    def stack(self, values, axis=0):
        return anp.stack(values, axis=axis)

    def getitem(self, x, index):
        return x[index]
