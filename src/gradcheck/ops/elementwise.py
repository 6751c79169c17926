"""Elementwise ops. Binary ones broadcast; their VJPs return the broadcast shape and
the engine's `unbroadcast` sums them back to each argument's shape, and their JVPs may
return an argument's shape, which the engine broadcasts to the output's."""

from __future__ import annotations

from collections.abc import Callable

from ..util.lazy_numpy import np
from .broadcast import broadcast_shapes
from .registry import JVP, VJP, Interval, Op, Shape, register


def _same_shape(x: Shape) -> Shape:
    return x


def binary(
    name: str,
    forward: Callable,
    vjp_a: VJP,
    vjp_b: VJP,
    tf: Callable,
    tf_name: str,
    doc: str,
    *,
    rules: tuple[str, str],
    tf_rules: tuple[str, str] | None = None,
    jvps: tuple[JVP, JVP],
    jvp_rules: tuple[str, str],
    tf_jvp_rules: tuple[str, str] | None = None,
    operator: str | None = None,
    kink: str | None = None,
    domain: dict[str, Interval] | None = None,
) -> Op:
    return register(
        Op(
            name=name,
            params=("a", "b"),
            shape=broadcast_shapes,
            forward=forward,
            vjps=(vjp_a, vjp_b),
            tf=tf,
            tf_name=tf_name,
            doc=doc,
            operator=operator,
            kink=kink,
            rules=rules,
            tf_rules=tf_rules or rules,
            domain=domain or {},
            jvps=jvps,
            jvp_rules=jvp_rules,
            tf_jvp_rules=tf_jvp_rules or jvp_rules,
        )
    )


def unary(
    name: str,
    forward: Callable,
    vjp: VJP,
    tf: Callable,
    tf_name: str,
    doc: str,
    *,
    rule: str,
    tf_rule: str | None = None,
    jvp: JVP,
    jvp_rule: str,
    tf_jvp_rule: str | None = None,
    torch_rule: str | None = None,
    torch_jvp_rule: str | None = None,
    operator: str | None = None,
    kink: str | None = None,
    domain: dict[str, Interval] | None = None,
) -> Op:
    # torch_rule and torch_jvp_rule go together, left out where `ops.spelling` translates.
    return register(
        Op(
            name=name,
            params=("x",),
            shape=_same_shape,
            forward=forward,
            vjps=(vjp,),
            tf=tf,
            tf_name=tf_name,
            doc=doc,
            operator=operator,
            kink=kink,
            rules=(rule,),
            tf_rules=(tf_rule or rule,),
            domain=domain or {},
            jvps=(jvp,),
            jvp_rules=(jvp_rule,),
            tf_jvp_rules=(tf_jvp_rule or jvp_rule,),
            torch_rules=(torch_rule,) if torch_rule else (),
            torch_jvp_rules=(torch_jvp_rule,) if torch_jvp_rule else (),
        )
    )


def _safe_log(a: np.ndarray) -> np.ndarray:
    # TensorFlow's pow gradient for the exponent uses log(a) only where a > 0, else 0.
    positive = a > 0
    return np.where(positive, np.log(np.where(positive, a, 1)), 0)


def _where_shape(x: Shape, y: Shape, condition: object = None) -> Shape:
    return broadcast_shapes(np.shape(condition), x, y)


# `np.where(condition, x, y)` as an op, for the rules (`_safe_log`) run on the builtin
# engine's tensors: the condition is a constant, a mask of the values. Not registered:
# no expression uses it.
WHERE = Op(
    name="masked_where", params=("x", "y"), attrs={"condition": None}, shape=_where_shape,
    forward=lambda x, y, condition: np.where(condition, x, y),
    vjps=(
        lambda g, ans, x, y, condition: g * condition,
        lambda g, ans, x, y, condition: g * np.logical_not(condition),
    ),
    jvps=(
        lambda t, ans, x, y, condition: t * condition,
        lambda t, ans, x, y, condition: t * np.logical_not(condition),
    ),
    doc="elementwise condition ? x : y",
)  # fmt: skip


# The declarations are a table, laid out by hand: one op per block, its VJPs then its
# JVPs. Where the TensorFlow spelling of a rule is the NumPy one, it is not repeated.
# fmt: off
binary(
    "add", lambda a, b: np.add(a, b),
    lambda g, ans, a, b: g,
    lambda g, ans, a, b: g,
    lambda tf, a, b: tf.add(a, b), "tf.add", "a + b", operator="+",
    rules=("g", "g"),
    jvps=(lambda t, ans, a, b: t, lambda t, ans, a, b: t), jvp_rules=("t", "t"),
)
binary(
    "sub", lambda a, b: np.subtract(a, b),
    lambda g, ans, a, b: g,
    lambda g, ans, a, b: -g,
    lambda tf, a, b: tf.subtract(a, b), "tf.subtract", "a - b", operator="-",
    rules=("g", "-g"),
    jvps=(lambda t, ans, a, b: t, lambda t, ans, a, b: -t), jvp_rules=("t", "-t"),
)
binary(
    "mul", lambda a, b: np.multiply(a, b),
    lambda g, ans, a, b: g * b,
    lambda g, ans, a, b: g * a,
    lambda tf, a, b: tf.multiply(a, b), "tf.multiply", "a * b", operator="*",
    rules=("g * b", "g * a"),
    jvps=(lambda t, ans, a, b: t * b, lambda t, ans, a, b: a * t),
    jvp_rules=("t * b", "a * t"),
)
binary(
    "div", lambda a, b: np.divide(a, b),
    lambda g, ans, a, b: g / b,
    lambda g, ans, a, b: -g * a / (b * b),
    lambda tf, a, b: tf.divide(a, b), "tf.divide", "a / b", operator="/",
    rules=("g / b", "-g * a / b**2"), domain={"b": Interval(gap=0.25)},
    jvps=(lambda t, ans, a, b: t / b, lambda t, ans, a, b: -t * a / (b * b)),
    jvp_rules=("t / b", "-t * a / b**2"),
)
binary(
    "pow", lambda a, b: np.power(a, b),
    lambda g, ans, a, b: g * b * np.power(a, b - 1),
    lambda g, ans, a, b: g * ans * _safe_log(a),
    lambda tf, a, b: tf.pow(a, b), "tf.pow",
    "a ** b; the exponent's gradient is taken as 0 where a <= 0, as TensorFlow does",
    operator="**", kink="base", domain={"a": Interval(0.25, 4), "b": Interval(-3, 3)},
    rules=("g * b * a**(b - 1)", "g * a**b * np.log(np.where(a > 0, a, 1))"),
    tf_rules=("g * b * a**(b - 1)", "g * a**b * tf.math.log(tf.where(a > 0, a, tf.ones_like(a)))"),
    jvps=(
        lambda t, ans, a, b: t * b * np.power(a, b - 1),
        lambda t, ans, a, b: t * ans * _safe_log(a),
    ),
    jvp_rules=("t * b * a**(b - 1)", "t * a**b * np.log(np.where(a > 0, a, 1))"),
    tf_jvp_rules=(
        "t * b * a**(b - 1)", "t * a**b * tf.math.log(tf.where(a > 0, a, tf.ones_like(a)))",
    ),
)
binary(
    "maximum", lambda a, b: np.maximum(a, b),
    lambda g, ans, a, b: g * (a >= b),
    lambda g, ans, a, b: g * np.logical_not(a >= b),  # not `a < b`: with NaN, TF gives b
    lambda tf, a, b: tf.maximum(a, b), "tf.maximum",
    "elementwise max; at a tie the gradient goes to a", kink="tie",
    rules=("g * (a >= b)", "g * ~(a >= b)"),
    tf_rules=("tf.where(a >= b, g, tf.zeros_like(g))", "tf.where(a >= b, tf.zeros_like(g), g)"),
    jvps=(lambda t, ans, a, b: t * (a >= b), lambda t, ans, a, b: t * np.logical_not(a >= b)),
    jvp_rules=("t * (a >= b)", "t * ~(a >= b)"),
    tf_jvp_rules=(
        "tf.where(a >= b, t, tf.zeros_like(t))", "tf.where(a >= b, tf.zeros_like(t), t)",
    ),
)
binary(
    "minimum", lambda a, b: np.minimum(a, b),
    lambda g, ans, a, b: g * (a <= b),
    lambda g, ans, a, b: g * np.logical_not(a <= b),  # not `a > b`: with NaN, TF gives b
    lambda tf, a, b: tf.minimum(a, b), "tf.minimum",
    "elementwise min; at a tie the gradient goes to a", kink="tie",
    rules=("g * (a <= b)", "g * ~(a <= b)"),
    tf_rules=("tf.where(a <= b, g, tf.zeros_like(g))", "tf.where(a <= b, tf.zeros_like(g), g)"),
    jvps=(lambda t, ans, a, b: t * (a <= b), lambda t, ans, a, b: t * np.logical_not(a <= b)),
    jvp_rules=("t * (a <= b)", "t * ~(a <= b)"),
    tf_jvp_rules=(
        "tf.where(a <= b, t, tf.zeros_like(t))", "tf.where(a <= b, tf.zeros_like(t), t)",
    ),
)

unary(
    "neg", lambda x: np.negative(x), lambda g, ans, x: -g,
    lambda tf, x: tf.negative(x), "tf.negative", "-x", operator="u-", rule="-g",
    jvp=lambda t, ans, x: -t, jvp_rule="-t",
)
unary(
    "exp", lambda x: np.exp(x), lambda g, ans, x: g * ans,
    lambda tf, x: tf.exp(x), "tf.exp", "e ** x",
    rule="g * np.exp(x)", tf_rule="g * tf.exp(x)", domain={"x": Interval(high=4)},
    jvp=lambda t, ans, x: t * ans, jvp_rule="t * np.exp(x)", tf_jvp_rule="t * tf.exp(x)",
)
unary(
    "log", lambda x: np.log(x), lambda g, ans, x: g / x,
    lambda tf, x: tf.math.log(x), "tf.math.log", "natural logarithm", rule="g / x",
    domain={"x": Interval(low=0.1)},
    jvp=lambda t, ans, x: t / x, jvp_rule="t / x",
)
unary(
    "sqrt", lambda x: np.sqrt(x), lambda g, ans, x: g * 0.5 / ans,
    lambda tf, x: tf.sqrt(x), "tf.sqrt", "square root",
    rule="g * 0.5 / np.sqrt(x)", tf_rule="g * 0.5 / tf.sqrt(x)", domain={"x": Interval(low=0.1)},
    jvp=lambda t, ans, x: t * 0.5 / ans,
    jvp_rule="t * 0.5 / np.sqrt(x)", tf_jvp_rule="t * 0.5 / tf.sqrt(x)",
)
unary(
    "abs", lambda x: np.abs(x), lambda g, ans, x: g * np.sign(x),
    lambda tf, x: tf.abs(x), "tf.abs", "absolute value; abs'(0) = 0", kink="zero",
    rule="g * np.sign(x)", tf_rule="g * tf.sign(x)",
    jvp=lambda t, ans, x: t * np.sign(x), jvp_rule="t * np.sign(x)", tf_jvp_rule="t * tf.sign(x)",
)
unary(
    "square", lambda x: np.square(x), lambda g, ans, x: g * 2 * x,
    lambda tf, x: tf.square(x), "tf.square", "x * x", rule="g * 2 * x",
    jvp=lambda t, ans, x: t * 2 * x, jvp_rule="t * 2 * x",
)
unary(
    "sin", lambda x: np.sin(x), lambda g, ans, x: g * np.cos(x),
    lambda tf, x: tf.sin(x), "tf.sin", "sine",
    rule="g * np.cos(x)", tf_rule="g * tf.cos(x)",
    jvp=lambda t, ans, x: t * np.cos(x), jvp_rule="t * np.cos(x)", tf_jvp_rule="t * tf.cos(x)",
)
unary(
    "cos", lambda x: np.cos(x), lambda g, ans, x: -g * np.sin(x),
    lambda tf, x: tf.cos(x), "tf.cos", "cosine",
    rule="-g * np.sin(x)", tf_rule="-g * tf.sin(x)",
    jvp=lambda t, ans, x: -t * np.sin(x), jvp_rule="-t * np.sin(x)", tf_jvp_rule="-t * tf.sin(x)",
)
unary(
    "tanh", lambda x: np.tanh(x), lambda g, ans, x: g * (1 - ans * ans),
    lambda tf, x: tf.tanh(x), "tf.tanh", "hyperbolic tangent",
    rule="g * (1 - np.tanh(x)**2)", tf_rule="g * (1 - tf.tanh(x)**2)",
    jvp=lambda t, ans, x: t * (1 - ans * ans),
    jvp_rule="t * (1 - np.tanh(x)**2)", tf_jvp_rule="t * (1 - tf.tanh(x)**2)",
)
unary(
    "sigmoid", lambda x: 1 / (1 + np.exp(-x)), lambda g, ans, x: g * ans * (1 - ans),
    lambda tf, x: tf.sigmoid(x), "tf.sigmoid", "logistic function 1 / (1 + e ** -x)",
    rule="g * y * (1 - y)",
    jvp=lambda t, ans, x: t * ans * (1 - ans), jvp_rule="t * y * (1 - y)",
)
unary(
    "relu", lambda x: np.maximum(x, 0), lambda g, ans, x: g * (x > 0),
    lambda tf, x: tf.nn.relu(x), "tf.nn.relu", "max(x, 0); relu'(0) = 0", kink="zero",
    rule="g * (x > 0)", tf_rule="tf.where(x > 0, g, tf.zeros_like(g))",
    jvp=lambda t, ans, x: t * (x > 0),
    jvp_rule="t * (x > 0)", tf_jvp_rule="tf.where(x > 0, t, tf.zeros_like(t))",
)
# fmt: on
