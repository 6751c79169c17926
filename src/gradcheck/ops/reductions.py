"""Reductions over `axis=None|int|list` with `keepdims`."""

from __future__ import annotations

from collections.abc import Callable

from ..util.lazy_numpy import np
from .broadcast import expand_reduced, normalize_axes, reduced_shape
from .registry import JVP, VJP, Op, Shape, ShapeError, register

REDUCE_ATTRS = {"axis": None, "keepdims": False}


def _reduce_shape(x: Shape, axis: object = None, keepdims: object = False) -> Shape:
    if not isinstance(keepdims, bool):
        raise ShapeError(f"keepdims must be true or false, got {keepdims!r}")
    return reduced_shape(x, normalize_axes(axis, len(x)), keepdims)


def reduced_size(shape: Shape, axis: object) -> int:
    """How many elements each output element of a reduction summarises."""
    return int(np.prod([shape[i] for i in normalize_axes(axis, len(shape))], dtype=np.int64))


def _np_axis(axis: object) -> object:
    return tuple(axis) if isinstance(axis, list) else axis


def reduction(
    name: str,
    forward: Callable,
    vjp: VJP,
    tf_fn: str,
    doc: str,
    *,
    rule: str,
    tf_rule: str,
    jvp: JVP,
    jvp_rule: str,
    tf_jvp_rule: str,
    kink: str | None = None,
) -> Op:
    return register(
        Op(
            name=name,
            params=("x",),
            attrs=REDUCE_ATTRS,
            shape=_reduce_shape,
            forward=lambda x, axis, keepdims: np.asarray(
                forward(x, axis=_np_axis(axis), keepdims=keepdims)
            ),
            vjps=(vjp,),
            tf=lambda tf, x, axis, keepdims: getattr(tf, tf_fn)(x, axis=axis, keepdims=keepdims),
            tf_name=f"tf.{tf_fn}",
            doc=doc,
            kink=kink,
            rules=(rule,),
            tf_rules=(tf_rule,),
            jvps=(lambda t, ans, x, axis, keepdims: jvp(t, ans, x, _np_axis(axis), keepdims),),
            jvp_rules=(jvp_rule,),
            tf_jvp_rules=(tf_jvp_rule,),
        )
    )


def spread(g, x, axis, keepdims):
    """A reduction's gradient back over every element it summarised."""
    return np.broadcast_to(expand_reduced(g, x.shape, axis, keepdims), x.shape)


def _ties(ans, x, axis, keepdims):
    """Each element's share of its extremum: 1/count where it ties for it, else 0."""
    # np.equal, not ==: on the builtin engine's tensors (create_graph) it gives a mask.
    winners = np.equal(x, expand_reduced(ans, x.shape, axis, keepdims))
    return winners / winners.sum(axis=_np_axis(axis), keepdims=True)


def _extremum_vjp(g, ans, x, axis, keepdims):
    # TensorFlow splits the gradient equally among the elements that tie for the extremum.
    return spread(g, x, axis, keepdims) * _ties(ans, x, axis, keepdims)


def _logsumexp(x, axis, keepdims):
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    out = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return out if keepdims else np.squeeze(out, axis=axis)


_SPREAD = "np.broadcast_to(g.reshape(kept_shape), x.shape)"
_TF_SPREAD = "tf.broadcast_to(tf.reshape(g, kept_shape), tf.shape(x))"
_TIES = "m = x == y.reshape(kept_shape); g.reshape(kept_shape) * m / m.sum(axis, keepdims=True)"
_TF_TIES = (
    "m = tf.cast(x == tf.reshape(y, kept_shape), g.dtype); "
    "tf.reshape(g, kept_shape) * m / tf.reduce_sum(m, axis, keepdims=True)"
)
_JVP_TIES = (
    "m = x == y.reshape(kept_shape); "
    "np.sum(t * m / m.sum(axis, keepdims=True), axis, keepdims=keepdims)"
)
_TF_JVP_TIES = (
    "m = tf.cast(x == tf.reshape(y, kept_shape), t.dtype); "
    "tf.reduce_sum(t * m / tf.reduce_sum(m, axis, keepdims=True), axis, keepdims=keepdims)"
)

# The declarations are a table, laid out by hand: one op per block.
# fmt: off
reduction(
    "sum", lambda x, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims),
    lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims),
    "reduce_sum", "sum over axis", rule=_SPREAD, tf_rule=_TF_SPREAD,
    jvp=lambda t, ans, x, axis, keepdims: np.sum(t, axis=axis, keepdims=keepdims),
    jvp_rule="np.sum(t, axis, keepdims=keepdims)",
    tf_jvp_rule="tf.reduce_sum(t, axis, keepdims=keepdims)",
)
reduction(
    "mean", lambda x, axis, keepdims: np.mean(x, axis=axis, keepdims=keepdims),
    lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims) / reduced_size(x.shape, axis),
    "reduce_mean", "mean over axis", rule=f"{_SPREAD} / n", tf_rule=f"{_TF_SPREAD} / n",
    jvp=lambda t, ans, x, axis, keepdims: np.mean(t, axis=axis, keepdims=keepdims),
    jvp_rule="np.mean(t, axis, keepdims=keepdims)",
    tf_jvp_rule="tf.reduce_mean(t, axis, keepdims=keepdims)",
)
reduction(
    "max", lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims),
    _extremum_vjp, "reduce_max",
    "max over axis; ties share the gradient equally", kink="tie",
    rule=_TIES, tf_rule=_TF_TIES,
    jvp=lambda t, ans, x, axis, keepdims: np.sum(
        t * _ties(ans, x, axis, keepdims), axis=axis, keepdims=keepdims
    ),
    jvp_rule=_JVP_TIES, tf_jvp_rule=_TF_JVP_TIES,
)
reduction(
    "min", lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims),
    _extremum_vjp, "reduce_min",
    "min over axis; ties share the gradient equally", kink="tie",
    rule=_TIES, tf_rule=_TF_TIES,
    jvp=lambda t, ans, x, axis, keepdims: np.sum(
        t * _ties(ans, x, axis, keepdims), axis=axis, keepdims=keepdims
    ),
    jvp_rule=_JVP_TIES, tf_jvp_rule=_TF_JVP_TIES,
)
reduction(
    "logsumexp", _logsumexp,
    lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims)
    * np.exp(x - expand_reduced(ans, x.shape, axis, keepdims)),
    "reduce_logsumexp", "log(sum(exp(x))) over axis, computed stably",
    rule="g.reshape(kept_shape) * np.exp(x - y.reshape(kept_shape))",
    tf_rule="tf.reshape(g, kept_shape) * tf.exp(x - tf.reshape(y, kept_shape))",
    jvp=lambda t, ans, x, axis, keepdims: np.sum(
        t * np.exp(x - expand_reduced(ans, x.shape, axis, keepdims)), axis=axis, keepdims=keepdims
    ),
    jvp_rule="np.sum(t * np.exp(x - y.reshape(kept_shape)), axis, keepdims=keepdims)",
    tf_jvp_rule="tf.reduce_sum(t * tf.exp(x - tf.reshape(y, kept_shape)), axis, keepdims=keepdims)",
)
# fmt: on
