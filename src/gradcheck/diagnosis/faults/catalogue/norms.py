"""Faults of the normalisations, the cross-entropy losses and clip: the statistics' terms,
the loss's sign, scale and softmax axis, the labels' gradient, and clip's mask."""

from __future__ import annotations

import math

import numpy as np

from ....ops import get_op
from ....ops.broadcast import normalize_axes
from ....ops.normalization import _inv_std, _mean
from ..rules import Fault

_NORMS = ("layer_norm", "batch_norm")  # one computation over different axes: one rule


def _norm_parts(x, axis, epsilon):
    axes = normalize_axes(axis, x.ndim)
    return axes, _inv_std(x, axes, epsilon)


def constant_statistics(g, ans, x, axis, epsilon):
    _, inv = _norm_parts(x, axis, epsilon)
    return inv * g


def no_variance_term(g, ans, x, axis, epsilon):
    axes, inv = _norm_parts(x, axis, epsilon)
    return inv * (g - _mean(g, axes))


def mean_twice(g, ans, x, axis, epsilon):
    axes, inv = _norm_parts(x, axis, epsilon)
    return inv * (g - 2 * _mean(g, axes) - ans * _mean(g * ans, axes))


def _ce_logits(g, ans, logits, labels, axis, softmax_axis=None):
    """softmax_cross_entropy's right logits VJP, its softmax taken along softmax_axis."""
    at = axis % logits.ndim
    softmax = get_op("softmax")(logits, axis=at if softmax_axis is None else softmax_axis)
    return (softmax * np.sum(labels, axis=at, keepdims=True) - labels) * np.expand_dims(g, at)


def _per_example(vjp):
    """A loss's VJP divided by the number of examples, as if the op averaged its losses."""
    return lambda g, ans, *args, **attrs: vjp(g, ans, *args, **attrs) / math.prod(ans.shape)


_CE = get_op("softmax_cross_entropy")
_SPARSE_CE = get_op("sparse_softmax_cross_entropy")

# fmt: off
FAULTS: tuple[Fault, ...] = (
    Fault(
        "batch_norm.constant-statistics",
        "the normalisation's VJP treats the mean and the variance as constants: it returns "
        "g / sqrt(var + epsilon) and drops both of the statistics' terms",
        "differentiate the statistics too: `inv * (g - np.mean(g, axis, keepdims=True) - "
        "y * np.mean(g * y, axis, keepdims=True))`",
        vjps={(op, 0): constant_statistics for op in _NORMS},
        seen="facebookresearch/CrypTen#143",
    ),
    Fault(
        "batch_norm.no-variance-term",
        "the normalisation's VJP differentiates the mean but treats the variance as a "
        "constant: the term y * mean(g * y) is missing",
        "subtract the variance's term as well: `inv * (g - np.mean(g, axis, keepdims=True) - "
        "y * np.mean(g * y, axis, keepdims=True))`",
        vjps={(op, 0): no_variance_term for op in _NORMS},
        seen="abhiskk/ladder#2",
    ),
    Fault(
        "layer_norm.mean-twice",
        "the normalisation's VJP subtracts the mean of the gradient, mean(g), twice",
        "subtract it once: `inv * (g - np.mean(g, axis, keepdims=True) - "
        "y * np.mean(g * y, axis, keepdims=True))`",
        vjps={(op, 0): mean_twice for op in _NORMS},
        seen="tenstorrent/tt-metal#53204",
    ),
    Fault(
        "softmax_cross_entropy.sign",
        "softmax_cross_entropy's VJP for the logits has the wrong sign: labels - softmax "
        "instead of softmax - labels",
        "use `(softmax(logits) * np.sum(labels, axis, keepdims=True) - labels) * "
        "np.expand_dims(g, axis)`",
        vjps={("softmax_cross_entropy", 0): lambda *args, **attrs: -_ce_logits(*args, **attrs)},
        seen="deeplearning4j/deeplearning4j#349",
    ),
    Fault(
        "softmax_cross_entropy.batch-divided",
        "softmax_cross_entropy's VJP divides by the number of examples, as if the op averaged "
        "the losses; it returns one loss per example, and any mean after it divides already",
        "do not divide: `(softmax(logits) * np.sum(labels, axis, keepdims=True) - labels) * "
        "np.expand_dims(g, axis)`",
        vjps={(_CE.name, i): _per_example(_CE.vjps[i]) for i in range(2)},
        seen="fetchai/ledger#1580",
    ),
    Fault(
        "softmax_cross_entropy.softmax-axis",
        "softmax_cross_entropy's VJP takes the softmax along axis 0, the batch, instead of "
        "the classes' axis",
        "take the softmax along the op's axis: `softmax(logits, axis)`",
        vjps={("softmax_cross_entropy", 0): lambda g, ans, logits, labels, axis: _ce_logits(
            g, ans, logits, labels, axis, softmax_axis=0)},
        seen="deeplearning4j/deeplearning4j#345",
    ),
    Fault(
        "softmax_cross_entropy.labels-constant",
        "softmax_cross_entropy gives the labels no gradient, as if they were constants "
        "(tf.nn.softmax_cross_entropy_with_logits before v2)",
        "the labels' VJP is `-log_softmax(logits, axis) * np.expand_dims(g, axis)`",
        vjps={("softmax_cross_entropy", 1): lambda g, ans, logits, labels, axis: (
            np.zeros_like(labels))},
        seen="tensorflow/tensorflow#16534",
    ),
    Fault(
        "sparse_softmax_cross_entropy.batch-divided",
        "sparse_softmax_cross_entropy's VJP divides by the number of examples, as if the op "
        "averaged the losses; it returns one loss per example",
        "do not divide: `(softmax(logits) - one_hot(labels)) * g[..., None]`",
        vjps={(_SPARSE_CE.name, 0): _per_example(_SPARSE_CE.vjps[0])},
        seen="paiml/aprender#2182",
    ),
    Fault(
        "clip.pass-through",
        "clip's VJP passes the gradient everywhere, as the identity's, also where x is "
        "outside [lo, hi] and the output does not move",
        "mask it: `g * ((x >= lo) & (x <= hi))`",
        vjps={("clip", 0): lambda g, ans, x, lo, hi: g},
        seen="tensorflow/tensorflow#44333",
    ),
    Fault(
        "clip.bounds-swapped",
        "clip's VJP tests the bounds the wrong way round, (x <= lo) & (x >= hi), a mask "
        "empty for lo < hi: no gradient passes anywhere",
        "pass it where x is inside: `g * ((x >= lo) & (x <= hi))`",
        vjps={("clip", 0): lambda g, ans, x, lo, hi: g * ((x <= lo) & (x >= hi))},
        seen="tenstorrent/tt-metal#48201",
    ),
)
# fmt: on
