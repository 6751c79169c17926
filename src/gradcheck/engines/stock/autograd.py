"""``--engine autograd``: HIPS autograd, a functional engine (``autograd.make_vjp``), every
op written with ``autograd.numpy`` (`NumpyApiOps`) and ``autograd.scipy``.

Second order nests ``make_vjp`` (autograd differentiates any order). Forward mode is
``autograd.make_jvp``, which is limited: autograd 1.9 defines JVPs for its NumPy but not
for ``scipy.special.expit``, so a forward-mode case through ``sigmoid`` is unsupported
(autograd raises NotImplementedError, and the case is skipped saying so).

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

from .numpy_api import NumpyApiOps, np_axis


class AutogradEngine(NumpyApiOps):
    name = "autograd"
    xp = anp
    conventions: ClassVar[dict[str, str]] = {
        "relu": "half",
        "clip": "stop",  # autograd's clip VJP: g where ans is strictly inside
        "maximum": "split",
        "minimum": "split",
        "pow": "nan",
    }
    higher_order = True  # nested make_vjp: inside an outer trace, the gradients are boxes

    def vjp(
        self,
        fn: Callable[..., Any],
        primals: Sequence[Any],
        cotangent: np.ndarray,
        create_graph: bool = False,
    ) -> list[Any]:
        pullback, _ = autograd.make_vjp(lambda args: fn(*args))(tuple(primals))
        return list(pullback(cotangent))

    def jvp(
        self, fn: Callable[..., Any], primals: Sequence[np.ndarray], tangents: Sequence[np.ndarray]
    ) -> Any:
        _, tangent = autograd.make_jvp(lambda args: fn(*args))(tuple(primals))(tuple(tangents))
        return tangent

    # -- what NumPy has no function for, and what autograd's NumPy cannot do ------------
    def sigmoid(self, x):
        return expit(x)

    def relu(self, x):
        return anp.maximum(x, 0.0)

    def logsumexp(self, x, axis=None, keepdims=False):
        # autograd's logsumexp gives a 0-d input a (1,)-shaped result under keepdims, and
        # its VJP then raises; over a scalar the answer is the scalar itself.
        if anp.ndim(x) == 0:
            return x
        return _logsumexp(x, axis=np_axis(axis), keepdims=keepdims)

    def softmax(self, x, axis=-1):
        return anp.exp(x - _logsumexp(x, axis=axis, keepdims=True))

    def log_softmax(self, x, axis=-1):
        return x - _logsumexp(x, axis=axis, keepdims=True)

    def broadcast_to(self, x, shape):
        # autograd's VJP of broadcast_to asserts "Can't handle extra leading dims": give
        # x the target's rank first (its leading size-1 axes broadcast like any other).
        lead = (1,) * (len(shape) - anp.ndim(x))
        return anp.broadcast_to(anp.reshape(x, lead + anp.shape(x)), tuple(shape))
