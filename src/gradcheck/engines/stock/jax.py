"""``--engine jax``: JAX, a functional engine (``jax.vjp``), every op written with
``jax.numpy`` (`NumpyApiOps`) and ``jax.nn``. Forward mode is ``jax.jvp``; second order
nests ``jax.vjp`` (``vjp(..., create_graph=True)`` returns JAX arrays that trace).

Install with ``pip install 'gradcheck[jax]'``. Importing this module switches on JAX's
64-bit mode (``jax.config.update("jax_enable_x64", True)``): without it JAX quietly
computes a float64 case in float32, and gradcheck would say so (a precision hint), not
what the case asks. Inputs go in as NumPy arrays of the case's dtype, bfloat16 included.

Conventions at kinks and ties (SPEC §4 and §6.1), probed on JAX 0.10: relu'(0) = 0, as
TensorFlow; abs'(0) = 1 (TensorFlow: 0); max/min reductions split the gradient among
ties, as TensorFlow; ``maximum``/``minimum`` split a tie half and half (TensorFlow gives
it to ``a``); the exponent's gradient of ``pow`` is NaN where the base is negative;
leaky_relu'(0) = 1 (TensorFlow: alpha) and selu'(0) = scale * alpha, the negative
branch's slope (TensorFlow: scale); elu'(0) = alpha, as TensorFlow; the max-pools
(``lax.reduce_window``) give a tie to the window's first maximum, as TensorFlow.

The main use is a custom op: subclass and add one method, e.g. a ``jax.custom_vjp``
function for an op declared in an ``--ops`` file::

    class Engine(JaxEngine):
        def smooth_relu(self, x):
            return my_smooth_relu(x)   # decorated with @jax.custom_vjp
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import jax.scipy.linalg
import jax.scipy.special
import numpy as np

from ...ops.pool_geometry import geometry
from .numpy_api import NumpyApiOps, np_axis
from .numpy_api_conv import NumpyApiConvOps
from .numpy_api_linalg import NumpyApiLinalgOps
from .numpy_api_pool import NumpyApiPoolOps

jax.config.update("jax_enable_x64", True)  # before any array is made


# Compiled programs, by engine class and `ExpressionFunction.key`: every check of one
# expression structure (a fuzz run's examples, a watch round, the lock's verify) compiles
# once. Bounded, as each program holds XLA's executable; the least recently used goes.
_PROGRAMS: OrderedDict[tuple, Callable[..., Any]] = OrderedDict()
PROGRAMS_KEPT = 256
# Any other function (a repro script's): compiled once while it lives (gradcheck asks twice).
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _pullback(fn: Callable[..., Any], primals: tuple, cotangent: Any) -> Any:
    output, vjp = jax.vjp(fn, *primals)
    return vjp(cotangent.astype(output.dtype))


def _compiled(
    engine: type, fn: Callable[..., Any], transform: Callable[..., Any]
) -> Callable[..., Any]:
    """`transform` of `fn` as one compiled program, called ``(primals, other)``: JAX would
    otherwise compile every op it runs eagerly. A function gradcheck made from a case
    (`ExpressionFunction`) shares its program with every function of the same key, its
    constants an argument rather than baked in."""
    key = getattr(fn, "key", None)
    if key is None:
        programs = _COMPILED.setdefault(fn, {})
        if transform not in programs:
            programs[transform] = jax.jit(lambda *args: transform(fn, *args))
        return programs[transform]
    key = (engine, transform, key)
    if key in _PROGRAMS:
        _PROGRAMS.move_to_end(key)
    else:
        program = fn.program

        def transformed(constants: tuple, *args: Any) -> Any:
            return transform(lambda *values: program(constants, *values), *args)

        _PROGRAMS[key] = jax.jit(transformed)
        while len(_PROGRAMS) > PROGRAMS_KEPT:
            _PROGRAMS.popitem(last=False)
    compiled, constants = _PROGRAMS[key], fn.constants
    return lambda *args: compiled(constants, *args)


def _tangent(fn: Callable[..., Any], primals: tuple, tangents: tuple) -> Any:
    return jax.jvp(fn, primals, tangents)[1]


class JaxEngine(NumpyApiLinalgOps, NumpyApiConvOps, NumpyApiPoolOps, NumpyApiOps):
    name = "jax"
    driver = "jax"
    xp = jnp
    conventions: ClassVar[dict[str, str]] = {
        "abs": "one",
        "clip": "half",  # jnp.clip is minimum(maximum(x, lo), hi): each tie split
        "maximum": "split",
        "minimum": "split",
        "pow": "nan",
        "leaky_relu": "one",
        "selu": "negative",
    }
    higher_order = True

    def vjp(
        self,
        fn: Callable[..., Any],
        primals: Sequence[Any],
        cotangent: np.ndarray,
        create_graph: bool = False,
    ) -> list[Any]:
        xs = tuple(jnp.asarray(p) for p in primals)
        if create_graph:  # inside gradcheck's own vjp of the gradient: JAX arrays that trace
            return list(_pullback(fn, xs, jnp.asarray(cotangent)))
        grads = _compiled(type(self), fn, _pullback)(xs, jnp.asarray(cotangent))
        return [np.asarray(g) for g in grads]

    def jvp(
        self, fn: Callable[..., Any], primals: Sequence[np.ndarray], tangents: Sequence[np.ndarray]
    ) -> np.ndarray:
        xs, ts = tuple(map(jnp.asarray, primals)), tuple(map(jnp.asarray, tangents))
        try:
            return np.asarray(_compiled(type(self), fn, _tangent)(xs, ts))
        except Exception as e:  # an op method's error arrives wrapped by gradcheck's driver
            cause = e.__cause__ or e
            if "forward-mode" not in str(cause) or "custom_vjp" not in str(cause):
                raise
            # SPEC §12: a custom_vjp has no forward mode: unsupported there, in JAX's words
            raise NotImplementedError(
                f"a jax.custom_vjp has no forward-mode rule; JAX: {cause}"
            ) from None

    def value(self, node: Any) -> np.ndarray:
        return np.asarray(node)

    # -- what NumPy has no function for ------------------------------------------------
    def sigmoid(self, x):
        return jax.nn.sigmoid(x)

    def relu(self, x):
        return jax.nn.relu(x)

    def rsqrt(self, x):
        return jax.lax.rsqrt(x)

    def erf(self, x):
        return jax.scipy.special.erf(x)

    def softplus(self, x):
        return jax.nn.softplus(x)

    def gelu(self, x, approximate=False):
        return jax.nn.gelu(x, approximate=approximate)

    def leaky_relu(self, x, alpha=0.2):
        return jax.nn.leaky_relu(x, negative_slope=alpha)

    def elu(self, x, alpha=1.0):
        return jax.nn.elu(x, alpha=alpha)

    def selu(self, x):
        return jax.nn.selu(x)

    def silu(self, x):
        return jax.nn.silu(x)

    def take_along_axis(self, x, indices, axis=-1):
        # JAX's own: the shared index-grid version raised TracerArrayConversionError
        # under forward mode's jit, where the indices arrive traced.
        return jnp.take_along_axis(x, indices, axis=axis)

    def triangular_solve(self, a, b, lower=True):
        # JAX's solve_triangular wants equal batch axes: broadcast them first, as TF does.
        batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a, b = (jnp.broadcast_to(v, (*batch, *v.shape[-2:])) for v in (a, b))
        return jax.scipy.linalg.solve_triangular(a, b, lower=lower)

    def logsumexp(self, x, axis=None, keepdims=False):
        return jax.nn.logsumexp(x, axis=np_axis(axis), keepdims=keepdims)

    def softmax(self, x, axis=-1):
        return jax.nn.softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return jax.nn.log_softmax(x, axis=axis)

    # -- pools: lax.reduce_window over TensorFlow's windows (its SAME pads given as pairs) --
    def _pool(self, kind, x, ksize, strides, padding, data_format, rank):
        geo = geometry(tuple(x.shape), ksize, strides, padding, data_format, rank)
        dims, steps, pads = [1] * x.ndim, [1] * x.ndim, [(0, 0)] * x.ndim
        for axis, k, s, pad in zip(geo.spatial, geo.ksize, geo.strides, geo.pads, strict=True):
            dims[axis], steps[axis], pads[axis] = k, s, pad
        window = (tuple(dims), tuple(steps), tuple(pads))
        if kind == "max":  # its VJP gives a tie to the window's first maximum, as TensorFlow
            return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, *window)
        total = jax.lax.reduce_window(x, 0.0, jax.lax.add, *window)
        count = jax.lax.reduce_window(jnp.ones(x.shape, x.dtype), 0.0, jax.lax.add, *window)
        return total / count

    def one_hot(self, indices, depth=None, dtype=None):
        return jax.nn.one_hot(indices, depth, dtype=dtype or "float64")
