"""Spread and size reductions (SPEC §3.1): var, std (population, ddof 0) and norm.

`norm` is TensorFlow's: ``axis=None`` flattens (a vector norm, not NumPy's spectral norm
of a matrix), ``ord`` 1, 2 or 'inf' over one axis (or all of them), 'fro' over two.
At a zero vector norm 2 and 'fro' have no gradient (TensorFlow's is NaN, 0 / 0, and so
is this one); the fuzz domain keeps every element away from 0.
"""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import expand_reduced, normalize_axes
from .reductions import REDUCE_ATTRS, _np_axis, _reduce_shape, reduced_size, spread
from .registry import Interval, Op, Shape, ShapeError, register

ORDS = (1, 2, "inf", "fro")


def _norm_shape(x: Shape, ord: object = 2, axis: object = None, keepdims: object = False) -> Shape:
    if isinstance(ord, bool) or ord not in ORDS:
        raise ShapeError(f"ord must be one of 1, 2, 'inf', 'fro', got {ord!r}")
    two = isinstance(axis, (list, tuple)) and len(axis) == 2
    if ord == "fro" and not two:
        raise ShapeError(f"ord 'fro' needs two axes (axis=[-2, -1]), got axis={axis!r}")
    if two and ord != "fro":
        raise ShapeError(
            f"ord {ord!r} over two axes is a matrix norm; only 'fro' is supported there"
        )
    if isinstance(axis, (list, tuple)) and len(axis) not in (1, 2):
        raise ShapeError(f"axis must be None, one axis or two, got {axis!r}")
    return _reduce_shape(x, axis, keepdims)


def _centred(x, axis):
    return x - np.mean(x, axis=_np_axis(axis), keepdims=True)


def _var_vjp(g, ans, x, axis, keepdims):
    return spread(g, x, axis, keepdims) * 2 * _centred(x, axis) / reduced_size(x.shape, axis)


def _std_vjp(g, ans, x, axis, keepdims):
    std = expand_reduced(ans, x.shape, axis, keepdims)
    return spread(g, x, axis, keepdims) * _centred(x, axis) / (reduced_size(x.shape, axis) * std)


def _norm(x, ord, axis, keepdims):
    axes = normalize_axes(axis, np.ndim(x))
    if ord == 1:
        return np.sum(np.abs(x), axis=axes, keepdims=keepdims)
    if ord == "inf":
        return np.max(np.abs(x), axis=axes, keepdims=keepdims)
    return np.sqrt(np.sum(x * x, axis=axes, keepdims=keepdims))


def _norm_slope(ans, x, ord, axis, keepdims):
    """d norm / d x, in x's shape."""
    if ord == 1:
        return np.sign(x)
    y = expand_reduced(ans, x.shape, axis, keepdims)
    if ord == "inf":  # TensorFlow's reduce_max splits a tie equally
        winners = np.equal(np.abs(x), y)
        count = np.sum(winners, axis=normalize_axes(axis, x.ndim), keepdims=True)
        return np.sign(x) * winners / count
    return x / y


def _tf_norm(tf, x, ord, axis, keepdims):
    # tf.norm takes one axis as an int (a 1-tuple is refused) and two as a tuple
    axis = (axis[0] if len(axis) == 1 else tuple(axis)) if isinstance(axis, list) else axis
    return tf.norm(x, ord={"inf": float("inf")}.get(ord, ord), axis=axis, keepdims=keepdims)


_SPREAD = "np.broadcast_to(g.reshape(kept_shape), x.shape)"
_TF_SPREAD = "tf.reshape(g, kept_shape)"
_SLOPE = (
    "s = np.sign(x) if ord == 1 else x / y.reshape(kept_shape) if ord in (2, 'fro') else "
    "np.sign(x) * (w := np.abs(x) == y.reshape(kept_shape)) / w.sum(axis, keepdims=True); "
)
_TF_SLOPE = (
    "w = tf.cast(tf.abs(x) == tf.reshape(y, kept_shape), x.dtype); "
    "s = tf.sign(x) if ord == 1 else x / tf.reshape(y, kept_shape) if ord in (2, 'fro') else "
    "tf.sign(x) * w / tf.reduce_sum(w, axis, keepdims=True); "
)

# The declarations are a table, laid out by hand: one op per block.
# fmt: off
register(Op(
    name="var", params=("x",), attrs=REDUCE_ATTRS, shape=_reduce_shape,
    forward=lambda x, axis, keepdims: np.asarray(np.var(x, axis=_np_axis(axis), keepdims=keepdims)),
    vjps=(_var_vjp,),
    tf=lambda tf, x, axis, keepdims: tf.math.reduce_variance(x, axis=axis, keepdims=keepdims),
    tf_name="tf.math.reduce_variance", doc="population variance over axis (ddof 0)",
    rules=(f"{_SPREAD} * 2 * (x - x.mean(axis, keepdims=True)) / n",),
    tf_rules=(f"{_TF_SPREAD} * 2 * (x - tf.reduce_mean(x, axis, keepdims=True)) / n",),
    jvps=(lambda t, ans, x, axis, keepdims: np.mean(
        2 * _centred(x, axis) * t, axis=_np_axis(axis), keepdims=keepdims
    ),),
    jvp_rules=("np.mean(2 * (x - x.mean(axis, keepdims=True)) * t, axis, keepdims=keepdims)",),
    tf_jvp_rules=(
        "tf.reduce_mean(2 * (x - tf.reduce_mean(x, axis, keepdims=True)) * t, axis, "
        "keepdims=keepdims)",
    ),
))
register(Op(
    name="std", params=("x",), attrs=REDUCE_ATTRS, shape=_reduce_shape,
    forward=lambda x, axis, keepdims: np.asarray(np.std(x, axis=_np_axis(axis), keepdims=keepdims)),
    vjps=(_std_vjp,),
    tf=lambda tf, x, axis, keepdims: tf.math.reduce_std(x, axis=axis, keepdims=keepdims),
    tf_name="tf.math.reduce_std",
    doc="population standard deviation over axis (ddof 0); no gradient where it is 0",
    rules=(f"{_SPREAD} * (x - x.mean(axis, keepdims=True)) / (n * y.reshape(kept_shape))",),
    tf_rules=(
        f"{_TF_SPREAD} * (x - tf.reduce_mean(x, axis, keepdims=True)) "
        "/ (n * tf.reshape(y, kept_shape))",
    ),
    jvps=(lambda t, ans, x, axis, keepdims: np.sum(
        _centred(x, axis) * t, axis=_np_axis(axis), keepdims=keepdims
    ) / (reduced_size(x.shape, axis) * ans),),
    jvp_rules=("np.sum((x - x.mean(axis, keepdims=True)) * t, axis, keepdims=keepdims) / (n * y)",),
    tf_jvp_rules=(
        "tf.reduce_sum((x - tf.reduce_mean(x, axis, keepdims=True)) * t, axis, "
        "keepdims=keepdims) / (n * y)",
    ),
))
register(Op(
    name="norm", params=("x",), attrs={"ord": 2, **REDUCE_ATTRS}, shape=_norm_shape,
    forward=lambda x, ord, axis, keepdims: np.asarray(_norm(x, ord, axis, keepdims)),
    vjps=(lambda g, ans, x, ord, axis, keepdims: spread(g, x, axis, keepdims)
          * _norm_slope(ans, x, ord, axis, keepdims),),
    tf=_tf_norm, tf_name="tf.norm",
    doc="vector norm (ord 1, 2, 'inf') over axis, None flattening; 'fro' over two axes; "
        "an 'inf' tie shares the gradient equally",
    rules=(_SLOPE + f"{_SPREAD} * s",), tf_rules=(_TF_SLOPE + f"{_TF_SPREAD} * s",),
    jvps=(lambda t, ans, x, ord, axis, keepdims: np.sum(
        t * _norm_slope(ans, x, ord, axis, keepdims),
        axis=normalize_axes(axis, x.ndim), keepdims=keepdims,
    ),),
    jvp_rules=(_SLOPE + "np.sum(t * s, axis, keepdims=keepdims)",),
    tf_jvp_rules=(_TF_SLOPE + "tf.reduce_sum(t * s, axis, keepdims=keepdims)",),
    domain={"x": Interval(gap=0.25)}, attr_choices={"ord": ORDS},
))
# fmt: on
