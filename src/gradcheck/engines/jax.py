"""``--engine jax``: JAX, a functional engine (``jax.vjp``), every op written with
``jax.numpy`` and ``jax.nn``.

Install with ``pip install 'gradcheck[jax]'``. Importing this module switches on JAX's
64-bit mode (``jax.config.update("jax_enable_x64", True)``): without it JAX quietly
computes a float64 case in float32, and gradcheck would say so (a precision hint), not
what the case asks. Inputs go in as NumPy arrays of the case's dtype, bfloat16 included.

Conventions at kinks and ties (SPEC §4 and §6.1), probed on JAX 0.10: relu'(0) = 0, as
TensorFlow; abs'(0) = 1 (TensorFlow: 0); max/min reductions split the gradient among
ties, as TensorFlow; ``maximum``/``minimum`` split a tie half and half (TensorFlow gives
it to ``a``); the exponent's gradient of ``pow`` is NaN where the base is negative.

The main use is a custom op: subclass and add one method, e.g. a ``jax.custom_vjp``
function for an op declared in an ``--ops`` file::

    class Engine(JaxEngine):
        def softplus(self, x):
            return my_softplus(x)   # decorated with @jax.custom_vjp
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # before any array is made


def _axis(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, list) else axis


_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _jitted_vjp(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`'s VJP as one compiled program, kept while `fn` lives (gradcheck asks twice)."""
    if fn not in _COMPILED:

        def pullback(primals: tuple, cotangent: Any) -> Any:
            output, vjp = jax.vjp(fn, *primals)
            return vjp(cotangent.astype(output.dtype))

        _COMPILED[fn] = jax.jit(pullback)
    return _COMPILED[fn]


class JaxEngine:
    name = "jax"
    conventions: ClassVar[dict[str, str]] = {
        "abs": "one",
        "maximum": "split",
        "minimum": "split",
        "pow": "nan",
    }

    def vjp(
        self, fn: Callable[..., Any], primals: Sequence[np.ndarray], cotangent: np.ndarray
    ) -> list[np.ndarray]:
        # Compiled as one program: JAX would otherwise compile every op it runs eagerly.
        grads = _jitted_vjp(fn)(tuple(jnp.asarray(p) for p in primals), jnp.asarray(cotangent))
        return [np.asarray(g) for g in grads]

    def value(self, node: Any) -> np.ndarray:
        return np.asarray(node)

    # -- elementwise -------------------------------------------------------------------
    def add(self, a, b):
        return jnp.add(a, b)

    def sub(self, a, b):
        return jnp.subtract(a, b)

    def mul(self, a, b):
        return jnp.multiply(a, b)

    def div(self, a, b):
        return jnp.divide(a, b)

    def pow(self, a, b):
        return jnp.power(a, b)

    def maximum(self, a, b):
        return jnp.maximum(a, b)

    def minimum(self, a, b):
        return jnp.minimum(a, b)

    def neg(self, x):
        return jnp.negative(x)

    def exp(self, x):
        return jnp.exp(x)

    def log(self, x):
        return jnp.log(x)

    def sqrt(self, x):
        return jnp.sqrt(x)

    def abs(self, x):
        return jnp.abs(x)

    def square(self, x):
        return jnp.square(x)

    def sin(self, x):
        return jnp.sin(x)

    def cos(self, x):
        return jnp.cos(x)

    def tanh(self, x):
        return jnp.tanh(x)

    def sigmoid(self, x):
        return jax.nn.sigmoid(x)

    def relu(self, x):
        return jax.nn.relu(x)

    # -- linear algebra, reductions, nn --------------------------------------------------
    def matmul(self, a, b):
        return jnp.matmul(a, b)

    def sum(self, x, axis=None, keepdims=False):
        return jnp.sum(x, axis=_axis(axis), keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return jnp.mean(x, axis=_axis(axis), keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return jnp.max(x, axis=_axis(axis), keepdims=keepdims)

    def min(self, x, axis=None, keepdims=False):
        return jnp.min(x, axis=_axis(axis), keepdims=keepdims)

    def logsumexp(self, x, axis=None, keepdims=False):
        return jax.nn.logsumexp(x, axis=_axis(axis), keepdims=keepdims)

    def softmax(self, x, axis=-1):
        return jax.nn.softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return jax.nn.log_softmax(x, axis=axis)

    # -- shape ---------------------------------------------------------------------------
    def reshape(self, x, shape):
        return jnp.reshape(x, shape)

    def transpose(self, x, perm=None):
        return jnp.transpose(x, perm)

    def matrix_transpose(self, x):
        return jnp.swapaxes(x, -1, -2)

    def expand_dims(self, x, axis=0):
        return jnp.expand_dims(x, axis)

    def squeeze(self, x, axis=None):
        if axis == []:  # TensorFlow: every size-1 axis
            axis = None
        return jnp.squeeze(x, axis=_axis(axis))

    def broadcast_to(self, x, shape):
        return jnp.broadcast_to(x, shape)

    def concat(self, values, axis=0):
        return jnp.concatenate(values, axis=axis)

    def stack(self, values, axis=0):
        return jnp.stack(values, axis=axis)

    def getitem(self, x, index):
        return x[index]
