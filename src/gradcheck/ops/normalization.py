"""Normalisation and the soft-label loss (SPEC §3.1): layer_norm, batch_norm,
softmax_cross_entropy.

``layer_norm`` and ``batch_norm`` are one computation over different default axes:
``(x - mean) / sqrt(var + epsilon)`` with the statistics of ``axis`` (the axes reduced: the
features for a layer, the batch, and for NHWC images its positions ``[0, 1, 2]``, for a
batch norm in training mode), no scale or shift (those are ``mul``/``add`` around it). Their
VJP keeps both mean-of-gradient terms, ``inv * (g - mean(g) - y * mean(g * y))``; the
Jacobian is symmetric, so the JVP is the same formula in ``t``.

``softmax_cross_entropy``'s labels are probabilities, differentiable; they must sum to 1
along ``axis`` (TensorFlow's gradient assumes it), which the case reader checks where
the values are known (`Op.value_rule`).
"""

from __future__ import annotations

import math
from typing import Any

from ..util.lazy_numpy import np
from .broadcast import fmt_shape, normalize_axes, normalize_axis
from .registry import Op, Shape, ShapeError, ValueRule, get_op, register


def _norm_shape(x: Shape, axis: Any = None, epsilon: Any = 1e-5) -> Shape:
    if isinstance(axis, bool) or not isinstance(axis, (int, list, tuple)):
        raise ShapeError(f"axis must be an integer or a list of integers, got {axis!r}")
    if isinstance(axis, (list, tuple)) and not axis:
        raise ShapeError("axis [] reduces nothing: name at least one axis")
    normalize_axes(axis, len(x))
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon >= 0:
        raise ShapeError(f"epsilon must be a number >= 0, got {epsilon!r}")
    return tuple(x)


def _mean(a, axis):
    return np.mean(a, axis=axis, keepdims=True)


def _inv_std(x, axes, epsilon):
    centred = x - _mean(x, axes)
    return 1 / np.sqrt(_mean(centred * centred, axes) + epsilon)


def _normalize(x, axis, epsilon):
    axes = normalize_axes(axis, x.ndim)
    return (x - _mean(x, axes)) * _inv_std(x, axes, epsilon)


def _norm_vjp(g, ans, x, axis, epsilon):
    # Both mean terms: the mean's gradient (mean(g)) and the variance's (y * mean(g * y)).
    axes = normalize_axes(axis, x.ndim)
    return _inv_std(x, axes, epsilon) * (g - _mean(g, axes) - ans * _mean(g * ans, axes))


_NORM_RULE = ("m = np.mean(x, axis, keepdims=True); "
              "inv = 1 / np.sqrt(np.mean((x - m) ** 2, axis, keepdims=True) + epsilon); "
              "inv * ({g} - np.mean({g}, axis, keepdims=True) - y * np.mean({g} * y, axis, "
              "keepdims=True))")  # fmt: skip
_TF_NORM_RULE = ("m, v = tf.nn.moments(x, axis, keepdims=True); "
                 "tf.math.rsqrt(v + epsilon) * ({g} - tf.reduce_mean({g}, axis, keepdims=True) "
                 "- y * tf.reduce_mean({g} * y, axis, keepdims=True))")  # fmt: skip


def _tf_norm(tf, x, axis, epsilon):
    # Not tf.nn.moments: its variance stops the mean's gradient, right at first order (the
    # variance's slope in the mean is 0 there) but not at second.
    axes = list(normalize_axes(axis, len(x.shape)))
    centred = x - tf.reduce_mean(x, axes, keepdims=True)
    var = tf.reduce_mean(tf.square(centred), axes, keepdims=True)
    return centred * tf.math.rsqrt(var + epsilon)


def _ce_shape(logits: Shape, labels: Shape, axis: Any = -1) -> Shape:
    at = normalize_axis(axis, len(logits))
    if tuple(labels) != tuple(logits):
        raise ShapeError(
            f"labels has shape {fmt_shape(labels)}; it needs logits' shape {fmt_shape(logits)} "
            "(a probability per class)"
        )
    return tuple(d for a, d in enumerate(logits) if a != at)


def _ce(logits, labels, axis):
    return -np.sum(labels * get_op("log_softmax")(logits, axis=axis), axis=axis)


def _ce_logits_vjp(g, ans, logits, labels, axis):
    # The exact rule, softmax * sum(labels) - labels: TensorFlow's softmax - labels where
    # the labels sum to 1, as they must.
    at = axis % logits.ndim
    softmax = get_op("softmax")(logits, axis=at)
    total = np.sum(labels, axis=at, keepdims=True)
    return (softmax * total - labels) * np.expand_dims(g, at)


def _ce_labels_vjp(g, ans, logits, labels, axis):
    at = axis % logits.ndim
    return -get_op("log_softmax")(logits, axis=at) * np.expand_dims(g, at)


def _ce_logits_jvp(t, ans, logits, labels, axis):
    at = axis % logits.ndim
    softmax = get_op("softmax")(logits, axis=at)
    total = np.sum(labels, axis=at, keepdims=True)
    return np.sum((softmax * total - labels) * t, axis=at)


def _ce_labels_jvp(t, ans, logits, labels, axis):
    at = axis % logits.ndim
    return -np.sum(get_op("log_softmax")(logits, axis=at) * t, axis=at)


LABEL_SUM_TOLERANCE = 1e-6


def _ce_labels_check(param: str, values, logits: Shape, labels: Shape, axis: Any = -1):
    """softmax_cross_entropy's labels (their numbers flat, in C order) sum to 1 along axis;
    None when they do. Plain Python: `gradcheck list` checks cases without NumPy."""
    if values is None:
        return (f"labels are drawn at random, but they must sum to 1 along axis {axis} "
                "(probabilities): give their values, or compute them, e.g. softmax(z)")  # fmt: skip
    at = normalize_axis(axis, len(labels))
    n, inner = labels[at], math.prod(labels[at + 1 :])
    sums = (
        math.fsum(values[start + k * inner] for k in range(n))
        for block in range(0, len(values), n * inner)
        for start in range(block, block + inner)
    )
    worst = max(sums, key=lambda total: abs(total - 1.0), default=1.0)
    if abs(worst - 1.0) > LABEL_SUM_TOLERANCE:
        return (f"labels must sum to 1 along axis {axis} (probabilities; TensorFlow's gradient "
                f"assumes it), but one sums to {worst:.6g}")  # fmt: skip
    return None


def _ce_labels_made(param: str, values, logits: Shape, labels: Shape, axis: Any = -1):
    """Any numbers made labels: |v| + 1, each divided by their sum along axis."""
    at = normalize_axis(axis, len(labels))
    weights = np.abs(np.reshape(np.asarray(values, np.float64), labels)) + 1.0
    return tuple((weights / np.sum(weights, axis=at, keepdims=True)).ravel().tolist())


_SOFTMAX = "np.exp(logits) / np.sum(np.exp(logits), axis, keepdims=True)"
_LOG_SOFTMAX = "(logits - np.log(np.sum(np.exp(logits), axis, keepdims=True)))"
_TOTAL = "np.sum(labels, axis, keepdims=True)"
_TF_TOTAL = "tf.reduce_sum(labels, axis, keepdims=True)"

# The declarations are a table, laid out by hand: one op per block.
# fmt: off
for _name, _axis, _what in (("layer_norm", -1, "the features"), ("batch_norm", 0, "the batch")):
    register(Op(
        name=_name, params=("x",), attrs={"axis": _axis, "epsilon": 1e-5}, shape=_norm_shape,
        forward=_normalize, vjps=(_norm_vjp,), jvps=(_norm_vjp,), tf=_tf_norm,
        tf_name="c = x - tf.reduce_mean(x, axis, keepdims=True); "
                "c * tf.math.rsqrt(tf.reduce_mean(c**2, axis, keepdims=True) + epsilon) "
                "(tf.nn.moments' formula, without its stop_gradient)",
        doc=f"(x - mean) / sqrt(var + epsilon), the statistics over axis ({_what}; "
            "training mode, no scale or shift)",
        rules=(_NORM_RULE.format(g="g"),), tf_rules=(_TF_NORM_RULE.format(g="g"),),
        jvp_rules=(_NORM_RULE.format(g="t"),), tf_jvp_rules=(_TF_NORM_RULE.format(g="t"),),
        attr_choices={"epsilon": (1e-5, 1e-3)},
    ))
register(Op(
    name="softmax_cross_entropy", params=("logits", "labels"), attrs={"axis": -1},
    shape=_ce_shape, forward=_ce,
    vjps=(_ce_logits_vjp, _ce_labels_vjp), jvps=(_ce_logits_jvp, _ce_labels_jvp),
    # Composed, not the fused tf.nn.softmax_cross_entropy_with_logits: its gradient's
    # gradient in labels is zero (it returns the kernel's `softmax - labels` as a constant).
    tf=lambda tf, logits, labels, axis: -tf.reduce_sum(
        labels * tf.nn.log_softmax(logits, axis), axis),
    tf_name="-tf.reduce_sum(labels * tf.nn.log_softmax(logits, axis), axis) "
            "(tf.nn.softmax_cross_entropy_with_logits' value; its fused gradient has no "
            "second order in labels)",
    doc="-sum(labels * log_softmax(logits)) along axis; labels probabilities summing to 1",
    rules=(f"({_SOFTMAX} * {_TOTAL} - labels) * np.expand_dims(g, axis)",
           f"-{_LOG_SOFTMAX} * np.expand_dims(g, axis)"),
    tf_rules=(f"(tf.nn.softmax(logits, axis) * {_TF_TOTAL} - labels) * tf.expand_dims(g, axis)",
              "-tf.nn.log_softmax(logits, axis) * tf.expand_dims(g, axis)"),
    jvp_rules=(f"np.sum(({_SOFTMAX} * {_TOTAL} - labels) * t, axis)",
               f"-np.sum({_LOG_SOFTMAX} * t, axis)"),
    tf_jvp_rules=(f"tf.reduce_sum((tf.nn.softmax(logits, axis) * {_TF_TOTAL} - labels) * t, axis)",
                  "-tf.reduce_sum(tf.nn.log_softmax(logits, axis) * t, axis)"),
    value_rule=ValueRule(("labels",), check=_ce_labels_check, make=_ce_labels_made),
))
# fmt: on
