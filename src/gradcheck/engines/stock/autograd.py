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
``a``); the exponent's gradient of ``pow`` is NaN where the base is negative; the
max-pools (windows gathered by indexing, `NumpyApiPoolOps`) split a tie. autograd
has no leaky_relu, elu, selu or gelu: they are written here with ``np.where`` and
``autograd.scipy.special.erf``, following TensorFlow at 0.

The main use is a custom op: subclass and add one method, e.g. an ``autograd.extend``
primitive with its ``defvjp`` for an op declared in an ``--ops`` file::

    class Engine(AutogradEngine):
        def smooth_relu(self, x):
            return my_smooth_relu(x)   # @primitive, with defvjp(my_smooth_relu, ...)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import autograd
import autograd.numpy as anp
import numpy as np
from autograd.scipy.linalg import solve_triangular
from autograd.scipy.special import erf, expit
from autograd.scipy.special import logsumexp as _logsumexp

from .numpy_api import NumpyApiOps, np_axis
from .numpy_api_conv import NumpyApiConvOps
from .numpy_api_linalg import NumpyApiLinalgOps
from .numpy_api_pool import NumpyApiPoolOps

# selu's constants (Klambauer et al. 2017); autograd has no selu of its own.
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _axes(axis, ndim: int) -> list[int]:
    if axis is None:
        return list(range(ndim))
    return list(axis) if isinstance(axis, (list, tuple)) else [axis]


class AutogradEngine(NumpyApiLinalgOps, NumpyApiConvOps, NumpyApiPoolOps, NumpyApiOps):
    name = "autograd"
    driver = "autograd"
    xp = anp
    conventions: ClassVar[dict[str, str]] = {
        "relu": "half",
        "clip": "stop",  # autograd's clip VJP: g where ans is strictly inside
        "maximum": "split",
        "minimum": "split",
        "pow": "nan",
        "max_pool2d": "split",  # the pools' max is autograd's max, which splits a tie
        "max_pool1d": "split",
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

    def rsqrt(self, x):
        return 1 / anp.sqrt(x)

    def erf(self, x):
        return erf(x)

    def softplus(self, x):
        return anp.logaddexp(0.0, x)

    def gelu(self, x, approximate=False):
        if approximate:
            return 0.5 * x * (1 + anp.tanh(anp.sqrt(2 / anp.pi) * (x + 0.044715 * x**3)))
        return 0.5 * x * (1 + erf(x / anp.sqrt(2.0)))

    def leaky_relu(self, x, alpha=0.2):
        return anp.where(x > 0, x, alpha * x)

    def elu(self, x, alpha=1.0):
        # Not minimum(x, 0): autograd splits its tie at 0, halving elu'(0).
        return anp.where(x > 0, x, alpha * anp.expm1(anp.where(x > 0, 0.0, x)))

    def selu(self, x):
        # x < 0, not elu's x <= 0: TensorFlow's selu takes the positive branch at 0.
        negative = _SELU_ALPHA * anp.expm1(anp.where(x < 0, x, 0.0))
        return _SELU_SCALE * anp.where(x < 0, negative, x)

    def silu(self, x):
        return x * expit(x)

    def einsum(self, *operands, equation=None):
        # autograd's einsum VJP refuses a repeated index ("ii->i"): each repeat is taken
        # as a diagonal first, of the last two axes (the only ones its VJP takes), last.
        inputs, arrow, output = equation.partition("->")
        if not arrow:  # implicit: the indices used once, sorted
            used = inputs.replace(",", "")
            output = "".join(sorted(c for c in set(used) if used.count(c) == 1))
        subscripts, taken = [], []
        for s, x in zip(inputs.split(","), operands, strict=True):
            while len(set(s)) < len(s):
                c = next(c for c in s if s.count(c) > 1)
                p, q = s.index(c), s.index(c, s.index(c) + 1)
                x = anp.diagonal(anp.moveaxis(x, [p, q], [-1, -2]), axis1=-1, axis2=-2)
                s = s[:p] + s[p + 1 : q] + s[q + 1 :] + c
            subscripts.append(s)
            taken.append(x)
        return anp.einsum(f"{','.join(subscripts)}->{output}", *taken)

    def triangular_solve(self, a, b, lower=True):
        # autograd's solve_triangular VJP takes 2-D arrays only: a batch is solved matrix
        # by matrix, batch axes broadcast as TensorFlow's.
        if anp.ndim(a) == 2 and anp.ndim(b) == 2:
            return solve_triangular(a, b, lower=lower)
        batch = np.broadcast_shapes(anp.shape(a)[:-2], anp.shape(b)[:-2])
        a, b = (self.broadcast_to(v, (*batch, *anp.shape(v)[-2:])) for v in (a, b))
        flat_a = anp.reshape(a, (-1, *anp.shape(a)[-2:]))
        flat_b = anp.reshape(b, (-1, *anp.shape(b)[-2:]))
        solved = [solve_triangular(flat_a[k], flat_b[k], lower=lower) for k in range(len(flat_a))]
        return anp.reshape(anp.stack(solved), (*batch, *anp.shape(b)[-2:]))

    def prod(self, x, axis=None, keepdims=False):
        # autograd's prod VJP divides the product by x (NaN at a zero): the factors are
        # multiplied out one slice at a time instead, whose VJPs are exact there.
        axes = sorted({a % max(anp.ndim(x), 1) for a in _axes(axis, anp.ndim(x))}, reverse=True)
        for a in axes:
            at = (slice(None),) * a
            slices = [x[(*at, slice(i, i + 1))] for i in range(anp.shape(x)[a])]
            x = functools.reduce(anp.multiply, slices, anp.ones_like(slices[0]))
        return x if keepdims else anp.squeeze(x, axis=tuple(axes)) if axes else x

    def norm(self, x, ord=2, axis=None, keepdims=False):
        # autograd's norm has no VJP for ord=1, a NaN one for inf and a wrong one for two
        # axes under keepdims: each norm written out.
        axis = np_axis(axis)
        if ord == 1:
            return anp.sum(anp.abs(x), axis=axis, keepdims=keepdims)
        if ord == "inf":
            return anp.max(anp.abs(x), axis=axis, keepdims=keepdims)
        return anp.sqrt(anp.sum(x * x, axis=axis, keepdims=keepdims))

    def pad(self, x, paddings, mode="constant", constant_values=0):
        # autograd's pad VJP knows the constant mode only, and fails even on that one.
        return self.pad_by_concat(x, paddings, mode, constant_values)

    def repeat(self, x, repeats, axis=None):
        # autograd's repeat takes no list of counts.
        return self.repeat_by_index(x, repeats, axis)

    def cumprod(self, x, axis=0, exclusive=False, reverse=False):
        raise NotImplementedError("HIPS autograd defines no VJP for cumprod")

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

    def diag_part(self, x):
        # autograd's diagonal and trace VJPs take no axis1/axis2 (a TypeError): the
        # diagonal as a masked sum instead, whose VJPs it has.
        k = min(anp.shape(x)[-2:])
        return anp.sum(x[..., :k, :k] * np.eye(k), axis=-1)

    def trace(self, x):
        return anp.sum(self.diag_part(x), axis=-1)

    def where(self, cond, a, b):
        # autograd's where VJP hands back the broadcast shape, unsummed (a scalar a got a
        # (2,) gradient): every operand broadcast first, by the VJP that sums back.
        shape = np.broadcast_shapes(anp.shape(cond), anp.shape(a), anp.shape(b))
        cond, a, b = (self.broadcast_to(v, shape) for v in (cond, a, b))
        return anp.where(cond != 0, a, b)

    def broadcast_to(self, x, shape):
        # autograd's VJP of broadcast_to asserts "Can't handle extra leading dims": give
        # x the target's rank first (its leading size-1 axes broadcast like any other).
        lead = (1,) * (len(shape) - anp.ndim(x))
        return anp.broadcast_to(anp.reshape(x, lead + anp.shape(x)), tuple(shape))
