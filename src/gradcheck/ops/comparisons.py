"""Comparisons, where and clip (SPEC §3.1).

A comparison (``a > b``, or ``greater(a, b)``) is 0/1 in the operands' (the case's) dtype
and is never differentiated: it gives its operands zero gradient, as TensorFlow's
``tf.cast`` of a boolean does. ``where(cond, a, b)`` takes a where cond is nonzero;
``clip(x, lo, hi)`` passes the gradient where lo <= x <= hi, bounds included, as
``tf.clip_by_value`` does (convention ``pass``; ops/conventions.py has the others).
"""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import broadcast_shapes
from .registry import Op, Shape, ShapeError, register


def _zero(direction, ans, *args, **attrs):
    """A comparison's VJP and JVP for either operand: nothing flows through it."""
    return np.zeros_like(ans)


def _comparison(name: str, operator: str, tf_name: str, compare) -> None:
    register(Op(
        name=name, params=("a", "b"), shape=broadcast_shapes,
        forward=lambda a, b: compare(a, b).astype(np.result_type(a, b)),
        vjps=(_zero, _zero),
        tf=lambda tf, a, b: tf.cast(getattr(tf.math, tf_name)(a, b), a.dtype),
        tf_name=f"tf.cast(tf.math.{tf_name}(a, b), a.dtype)",
        doc=f"a {operator} b as 0/1 in the case's dtype; never differentiated",
        operator=operator,
        rules=("np.zeros_like(y)",) * 2, tf_rules=("tf.zeros_like(y)",) * 2,
        jvps=(_zero, _zero),
        jvp_rules=("np.zeros_like(y)",) * 2, tf_jvp_rules=("tf.zeros_like(y)",) * 2,
    ))  # fmt: skip


def _where_shape(cond: Shape, a: Shape, b: Shape) -> Shape:
    return broadcast_shapes(cond, a, b)


def _clip_shape(x: Shape, lo: object = None, hi: object = None) -> Shape:
    for name, bound in (("lo", lo), ("hi", hi)):
        if isinstance(bound, bool) or not isinstance(bound, (int, float)):
            raise ShapeError(f"{name} must be a number, got {bound!r}")
    if lo > hi:  # type: ignore[operator]
        raise ShapeError(f"lo {lo} is above hi {hi}")
    return x


def _tf_clip(tf, x, lo, hi):
    # The bounds as constants of x's dtype: tf.cast of a Python float goes through float32.
    return tf.clip_by_value(x, tf.constant(lo, x.dtype), tf.constant(hi, x.dtype))


def _inside(x, lo, hi):
    """Where clip passes the gradient: lo <= x <= hi, the bounds included (TensorFlow)."""
    return (x >= lo) & (x <= hi)


# The declarations are a table, laid out by hand: one op per block.
# fmt: off
for _name, _operator, _tf_name, _compare in (
    ("greater", ">", "greater", lambda a, b: np.greater(a, b)),
    ("greater_equal", ">=", "greater_equal", lambda a, b: np.greater_equal(a, b)),
    ("less", "<", "less", lambda a, b: np.less(a, b)),
    ("less_equal", "<=", "less_equal", lambda a, b: np.less_equal(a, b)),
    ("equal", "==", "equal", lambda a, b: np.equal(a, b)),
    ("not_equal", "!=", "not_equal", lambda a, b: np.not_equal(a, b)),
):
    _comparison(_name, _operator, _tf_name, _compare)

register(Op(
    name="where", params=("cond", "a", "b"), shape=_where_shape,
    forward=lambda cond, a, b: np.where(cond != 0, a, b),
    vjps=(
        _zero,
        lambda g, ans, cond, a, b: g * (cond != 0),
        lambda g, ans, cond, a, b: g * (cond == 0),
    ),
    tf=lambda tf, cond, a, b: tf.where(tf.not_equal(cond, 0), a, b), tf_name="tf.where",
    doc="a where cond is nonzero (a comparison, x > 0), else b; cond gets no gradient",
    rules=("np.zeros_like(y)", "g * (cond != 0)", "g * (cond == 0)"),
    tf_rules=("tf.zeros_like(y)", "tf.where(cond != 0, g, tf.zeros_like(g))",
              "tf.where(cond != 0, tf.zeros_like(g), g)"),
    jvps=(
        _zero,
        lambda t, ans, cond, a, b: t * (cond != 0),
        lambda t, ans, cond, a, b: t * (cond == 0),
    ),
    jvp_rules=("np.zeros_like(y)", "t * (cond != 0)", "t * (cond == 0)"),
    tf_jvp_rules=("tf.zeros_like(y)", "tf.where(cond != 0, t, tf.zeros_like(t))",
                  "tf.where(cond != 0, tf.zeros_like(t), t)"),
))
register(Op(
    name="clip", params=("x",), attrs={"lo": None, "hi": None}, shape=_clip_shape,
    forward=lambda x, lo, hi: np.clip(x, lo, hi),
    vjps=(lambda g, ans, x, lo, hi: g * _inside(x, lo, hi),),
    tf=_tf_clip,
    tf_name="tf.clip_by_value",
    doc="x limited to [lo, hi]; the gradient passes at the bounds, as TensorFlow's",
    kink="bound",
    rules=("g * ((x >= lo) & (x <= hi))",),
    tf_rules=("tf.where((x >= lo) & (x <= hi), g, tf.zeros_like(g))",),
    jvps=(lambda t, ans, x, lo, hi: t * _inside(x, lo, hi),),
    jvp_rules=("t * ((x >= lo) & (x <= hi))",),
    tf_jvp_rules=("tf.where((x >= lo) & (x <= hi), t, tf.zeros_like(t))",),
    attr_choices={"lo": (-1.0, 0.0), "hi": (0.5, 1.0)},
))
# fmt: on
