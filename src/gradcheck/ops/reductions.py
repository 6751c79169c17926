"""Reductions over `axis=None|int|list` with `keepdims`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .broadcast import expand_reduced, normalize_axes, reduced_shape
from .registry import VJP, Op, Shape, ShapeError, register

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


def reduction(name: str, forward: Callable, vjp: VJP, tf_fn: str, doc: str, kink=None) -> Op:
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
        )
    )


def spread(g, x, axis, keepdims):
    """A reduction's gradient back over every element it summarised."""
    return np.broadcast_to(expand_reduced(g, x.shape, axis, keepdims), x.shape)


def _extremum_vjp(g, ans, x, axis, keepdims):
    # TensorFlow splits the gradient equally among the elements that tie for the extremum.
    winners = x == expand_reduced(ans, x.shape, axis, keepdims)
    count = winners.sum(axis=_np_axis(axis), keepdims=True)
    return spread(g, x, axis, keepdims) * winners / count


def _logsumexp(x, axis, keepdims):
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    out = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return out if keepdims else np.squeeze(out, axis=axis)


# The declarations are a table, laid out by hand: one op per block.
# fmt: off
reduction(
    "sum", np.sum,
    lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims),
    "reduce_sum", "sum over axis",
)
reduction(
    "mean", np.mean,
    lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims) / reduced_size(x.shape, axis),
    "reduce_mean", "mean over axis",
)
reduction(
    "max", np.max, _extremum_vjp, "reduce_max",
    "max over axis; ties share the gradient equally", kink="tie",
)
reduction(
    "min", np.min, _extremum_vjp, "reduce_min",
    "min over axis; ties share the gradient equally", kink="tie",
)
reduction(
    "logsumexp", _logsumexp,
    lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims)
    * np.exp(x - expand_reduced(ans, x.shape, axis, keepdims)),
    "reduce_logsumexp", "log(sum(exp(x))) over axis, computed stably",
)
# fmt: on
