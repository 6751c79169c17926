"""Neural-network ops over one axis."""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import normalize_axis
from .registry import Op, Shape, register


def _axis_shape(x: Shape, axis: object = -1) -> Shape:
    normalize_axis(axis, len(x))
    return x


def _softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


# The declarations are a table, laid out by hand: one op per block.
# fmt: off
register(Op(
    name="softmax", params=("x",), attrs={"axis": -1}, shape=_axis_shape,
    forward=_softmax,
    # The Jacobian is diag(s) - s s^T; its VJP needs the whole row, not just the diagonal.
    vjps=(lambda g, ans, x, axis: ans * (g - np.sum(g * ans, axis=axis, keepdims=True)),),
    tf=lambda tf, x, axis: tf.nn.softmax(x, axis=axis), tf_name="tf.nn.softmax",
    doc="exp(x) / sum(exp(x)) along axis",
    rules=("y * (g - np.sum(g * y, axis, keepdims=True))",),
    tf_rules=("y * (g - tf.reduce_sum(g * y, axis, keepdims=True))",),
    # The Jacobian is symmetric: the JVP is the VJP's formula.
    jvps=(lambda t, ans, x, axis: ans * (t - np.sum(t * ans, axis=axis, keepdims=True)),),
    jvp_rules=("y * (t - np.sum(t * y, axis, keepdims=True))",),
    tf_jvp_rules=("y * (t - tf.reduce_sum(t * y, axis, keepdims=True))",),
))
register(Op(
    name="log_softmax", params=("x",), attrs={"axis": -1}, shape=_axis_shape,
    forward=_log_softmax,
    vjps=(lambda g, ans, x, axis: g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True),),
    tf=lambda tf, x, axis: tf.nn.log_softmax(x, axis=axis), tf_name="tf.nn.log_softmax",
    doc="x - logsumexp(x) along axis",
    rules=("g - np.exp(y) * np.sum(g, axis, keepdims=True)",),
    tf_rules=("g - tf.exp(y) * tf.reduce_sum(g, axis, keepdims=True)",),
    # The Jacobian I - softmax 1^T is not symmetric: the JVP weights t, not the sum.
    jvps=(lambda t, ans, x, axis: t - np.sum(np.exp(ans) * t, axis=axis, keepdims=True),),
    jvp_rules=("t - np.sum(np.exp(y) * t, axis, keepdims=True)",),
    tf_jvp_rules=("t - tf.reduce_sum(tf.exp(y) * t, axis, keepdims=True)",),
))
# fmt: on
