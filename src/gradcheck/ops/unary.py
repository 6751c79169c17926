"""More elementwise unary ops (SPEC §3.1): special functions, activations with their
attributes, and the zero-gradient ops sign, floor, ceil and round.

The VJPs use only NumPy calls the builtin engine's Tensors record (`engines/tensor.py`)
and the ops themselves (``ERF``), so second order works for every one of them.
"""

from __future__ import annotations

import math

from ..util.lazy_numpy import np
from .elementwise import unary
from .registry import Interval, Op, Shape, ShapeError, register

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)  # gelu's tanh approximation
_GELU_CUBIC = 0.044715
# selu's constants, as TensorFlow's kernel has them (Klambauer et al. 2017).
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _erf(x):
    # NumPy has no erf, math.erf is one Python call per element, and SciPy would be a
    # dependency for one function: erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1)/(2n+1)!!,
    # whose terms all have x's sign (no cancellation). 100 terms reach double precision
    # for |x| <= 6; beyond it erf is +-1 in float64.
    z = np.clip(x, -6, 6)
    term = total = z
    for n in range(1, 100):
        term = term * (2 * z * z) / (2 * n + 1)
        total = total + term
    return _TWO_OVER_SQRT_PI * np.exp(-z * z) * total


def _number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ShapeError(f"{name} must be a number, got {value!r}")


def _alpha_shape(x: Shape, alpha: object = None) -> Shape:
    _number("alpha", alpha)
    return x


def _gelu_shape(x: Shape, approximate: object = False) -> Shape:
    if not isinstance(approximate, bool):
        raise ShapeError(f"approximate must be true or false, got {approximate!r}")
    return x


def _gelu(x, approximate):
    if approximate:
        return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x**3)))
    return 0.5 * x * (1 + ERF(x / math.sqrt(2)))


def _gelu_slope(x, approximate):
    if approximate:
        u = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x**3))
        du = _SQRT_2_OVER_PI * (1 + 3 * _GELU_CUBIC * x**2)
        return 0.5 * (1 + u) + 0.5 * x * (1 - u * u) * du
    return 0.5 * (1 + ERF(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def _silu_slope(x):
    s = 1 / (1 + np.exp(-x))
    return s * (1 + x * (1 - s))


def _elu(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _tf_gelu(tf, x, approximate):
    # Written out: tf.nn.gelu's fused kernel is off by up to 1e-8 in float64.
    if approximate:
        return 0.5 * x * (1 + tf.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x**3)))
    return 0.5 * x * (1 + tf.math.erf(x / math.sqrt(2)))


def _keras_elu(tf, x, alpha):
    # tf.nn.elu has no alpha; Keras scales its negative branch, so does this.
    y = tf.nn.elu(x)
    return y if alpha == 1 else tf.where(x > 0, y, alpha * y)


def _zero(g, ans, x):
    return np.zeros_like(g)


# Rule texts that several spellings share.
_GELU_RULE = (
    "d = (0.5 * (1 + u) + 0.5 * x * (1 - u**2) * c * (1 + 3 * k * x**2)) if approximate "
    "else (0.5 * (1 + {2}(x / 2**0.5)) + x * {0}.exp(-x**2 / 2) / (2 * {1})**0.5); "
)
_GELU_U = "c = (2 / {1})**0.5; k = 0.044715; u = {0}.tanh(c * (x + k * x**3)); "
_SILU = "s = {0}; {1} * s * (1 + x * (1 - s))"
_SELU = "np.where(x < 0, y + 1.7580993408473766, 1.0507009873554805)"
_TF_SELU = "tf.where(x < 0, {0} * (y + 1.7580993408473766), {0} * 1.0507009873554805)"


def _gelu_text(direction: str, tf: bool) -> str:
    # NumPy has no erf: its spelling names the op itself (`erf`).
    spelling = ("tf", "3.141592653589793", "tf.math.erf") if tf else ("np", "np.pi", "erf")
    return _GELU_U.format(*spelling) + _GELU_RULE.format(*spelling) + f"{direction} * d"


# The declarations are a table, laid out by hand: one op per block, its VJP then its JVP.
# fmt: off
unary(
    "log1p", lambda x: np.log1p(x), lambda g, ans, x: g / (1 + x),
    lambda tf, x: tf.math.log1p(x), "tf.math.log1p", "log(1 + x), accurate near 0",
    rule="g / (1 + x)", domain={"x": Interval(low=-0.75)},
    jvp=lambda t, ans, x: t / (1 + x), jvp_rule="t / (1 + x)",
)
unary(
    "expm1", lambda x: np.expm1(x), lambda g, ans, x: g * (ans + 1),
    lambda tf, x: tf.math.expm1(x), "tf.math.expm1", "e ** x - 1, accurate near 0",
    rule="g * (y + 1)", domain={"x": Interval(high=4)},
    jvp=lambda t, ans, x: t * (ans + 1), jvp_rule="t * (y + 1)",
)
unary(
    "reciprocal", lambda x: np.reciprocal(x), lambda g, ans, x: -g * ans * ans,
    lambda tf, x: tf.math.reciprocal(x), "tf.math.reciprocal", "1 / x",
    rule="-g * y**2", domain={"x": Interval(gap=0.25)},
    jvp=lambda t, ans, x: -t * ans * ans, jvp_rule="-t * y**2",
)
unary(
    "rsqrt", lambda x: 1 / np.sqrt(x), lambda g, ans, x: -0.5 * g * ans**3,
    lambda tf, x: tf.math.rsqrt(x), "tf.math.rsqrt", "1 / sqrt(x)",
    rule="-0.5 * g * y**3", domain={"x": Interval(low=0.25)},
    jvp=lambda t, ans, x: -0.5 * t * ans**3, jvp_rule="-0.5 * t * y**3",
)
unary(
    "tan", lambda x: np.tan(x), lambda g, ans, x: g / np.cos(x) ** 2,
    lambda tf, x: tf.math.tan(x), "tf.math.tan", "tangent",
    rule="g / np.cos(x)**2", tf_rule="g / tf.cos(x)**2", domain={"x": Interval(-1.2, 1.2)},
    jvp=lambda t, ans, x: t / np.cos(x) ** 2,
    jvp_rule="t / np.cos(x)**2", tf_jvp_rule="t / tf.cos(x)**2",
)
ERF = unary(
    "erf", _erf, lambda g, ans, x: g * _TWO_OVER_SQRT_PI * np.exp(-x * x),
    lambda tf, x: tf.math.erf(x), "tf.math.erf", "the error function",
    rule="g * 2 / np.sqrt(np.pi) * np.exp(-x**2)",
    tf_rule="g * 2 / 3.141592653589793**0.5 * tf.exp(-x**2)",
    jvp=lambda t, ans, x: t * _TWO_OVER_SQRT_PI * np.exp(-x * x),
    jvp_rule="t * 2 / np.sqrt(np.pi) * np.exp(-x**2)",
    tf_jvp_rule="t * 2 / 3.141592653589793**0.5 * tf.exp(-x**2)",
    torch_rule="g * 2 / torch.pi**0.5 * torch.exp(-x**2)",
    torch_jvp_rule="t * 2 / torch.pi**0.5 * torch.exp(-x**2)",
)
unary(
    "softplus", lambda x: np.logaddexp(0, x), lambda g, ans, x: g / (1 + np.exp(-x)),
    lambda tf, x: tf.math.softplus(x), "tf.math.softplus", "log(1 + e ** x), computed stably",
    rule="g / (1 + np.exp(-x))", tf_rule="g * tf.sigmoid(x)",
    jvp=lambda t, ans, x: t / (1 + np.exp(-x)),
    jvp_rule="t / (1 + np.exp(-x))", tf_jvp_rule="t * tf.sigmoid(x)",
)
register(Op(
    name="gelu", params=("x",), attrs={"approximate": False}, shape=_gelu_shape,
    forward=_gelu,
    vjps=(lambda g, ans, x, approximate: g * _gelu_slope(x, approximate),),
    tf=_tf_gelu, tf_name="tf.nn.gelu, as its formula",
    doc="x * P(X <= x) for a standard normal X (approximate: its tanh approximation)",
    rules=(_gelu_text("g", tf=False),), tf_rules=(_gelu_text("g", tf=True),),
    jvps=(lambda t, ans, x, approximate: t * _gelu_slope(x, approximate),),
    jvp_rules=(_gelu_text("t", tf=False),), tf_jvp_rules=(_gelu_text("t", tf=True),),
    attr_choices={"approximate": (False, True)},
))
register(Op(
    name="leaky_relu", params=("x",), attrs={"alpha": 0.2}, shape=_alpha_shape,
    forward=lambda x, alpha: np.where(x > 0, x, alpha * x),
    vjps=(lambda g, ans, x, alpha: g * np.where(x > 0, 1, alpha),),
    # Written out: tf.nn.leaky_relu rounds alpha to float32 (0.2 becomes 0.20000000298).
    tf=lambda tf, x, alpha: tf.where(x > 0, x, alpha * x),
    tf_name="tf.nn.leaky_relu, as its formula",
    doc="x where x > 0, else alpha * x; the slope at 0 is alpha, as TensorFlow's", kink="zero",
    rules=("g * np.where(x > 0, 1, alpha)",), tf_rules=("tf.where(x > 0, g, alpha * g)",),
    jvps=(lambda t, ans, x, alpha: t * np.where(x > 0, 1, alpha),),
    jvp_rules=("t * np.where(x > 0, 1, alpha)",), tf_jvp_rules=("tf.where(x > 0, t, alpha * t)",),
    # torch.where makes its two Python numbers float32, alpha rounded.
    torch_rules=("torch.where(x > 0, g, alpha * g)",),
    torch_jvp_rules=("torch.where(x > 0, t, alpha * t)",),
    attr_choices={"alpha": (0.2, 0.01)},
))
register(Op(
    name="elu", params=("x",), attrs={"alpha": 1.0}, shape=_alpha_shape,
    forward=_elu,
    vjps=(lambda g, ans, x, alpha: g * np.where(x > 0, 1, ans + alpha),),
    tf=_keras_elu, tf_name="tf.nn.elu (times alpha where x <= 0)",
    doc="x where x > 0, else alpha * (e ** x - 1); at 0 the negative branch (slope alpha)",
    kink="zero",
    rules=("g * np.where(x > 0, 1, y + alpha)",), tf_rules=("tf.where(x > 0, g, g * (y + alpha))",),
    jvps=(lambda t, ans, x, alpha: t * np.where(x > 0, 1, ans + alpha),),
    jvp_rules=("t * np.where(x > 0, 1, y + alpha)",),
    tf_jvp_rules=("tf.where(x > 0, t, t * (y + alpha))",),
    attr_choices={"alpha": (1.0, 0.5)},
))
unary(
    "selu", lambda x: _SELU_SCALE * _elu(x, _SELU_ALPHA),
    # TensorFlow's kernel takes the positive branch at 0 (its test is y < 0): slope scale.
    lambda g, ans, x: g * np.where(x < 0, ans + _SELU_SCALE * _SELU_ALPHA, _SELU_SCALE),
    lambda tf, x: tf.nn.selu(x), "tf.nn.selu",
    "scale * elu(x, alpha) with selu's fixed constants; at 0 the positive branch (slope scale)",
    kink="zero", rule=f"g * {_SELU}", tf_rule=_TF_SELU.format("g"),
    jvp=lambda t, ans, x: t * np.where(x < 0, ans + _SELU_SCALE * _SELU_ALPHA, _SELU_SCALE),
    jvp_rule=f"t * {_SELU}", tf_jvp_rule=_TF_SELU.format("t"),
)
unary(
    "silu", lambda x: x / (1 + np.exp(-x)), lambda g, ans, x: g * _silu_slope(x),
    lambda tf, x: tf.nn.silu(x), "tf.nn.silu", "x * sigmoid(x) (swish)",
    rule=_SILU.format("1 / (1 + np.exp(-x))", "g"), tf_rule=_SILU.format("tf.sigmoid(x)", "g"),
    jvp=lambda t, ans, x: t * _silu_slope(x),
    jvp_rule=_SILU.format("1 / (1 + np.exp(-x))", "t"),
    tf_jvp_rule=_SILU.format("tf.sigmoid(x)", "t"),
)
# Piecewise constant: TensorFlow's gradient is 0 (sign) or None (floor, ceil, round),
# which it reads as 0; so is the finite difference anywhere but at a jump.
unary(
    "sign", lambda x: np.sign(x), _zero, lambda tf, x: tf.sign(x), "tf.sign",
    "-1, 0 or 1; its gradient is 0", kink="zero",
    rule="np.zeros_like(g)", tf_rule="tf.zeros_like(g)",
    jvp=lambda t, ans, x: np.zeros_like(t), jvp_rule="np.zeros_like(t)",
    tf_jvp_rule="tf.zeros_like(t)",
)
unary(
    "floor", lambda x: np.floor(x), _zero, lambda tf, x: tf.floor(x), "tf.floor",
    "the largest integer <= x; its gradient is 0",
    rule="np.zeros_like(g)", tf_rule="tf.zeros_like(g)",
    jvp=lambda t, ans, x: np.zeros_like(t), jvp_rule="np.zeros_like(t)",
    tf_jvp_rule="tf.zeros_like(t)",
)
unary(
    "ceil", lambda x: np.ceil(x), _zero, lambda tf, x: tf.math.ceil(x), "tf.math.ceil",
    "the smallest integer >= x; its gradient is 0",
    rule="np.zeros_like(g)", tf_rule="tf.zeros_like(g)",
    jvp=lambda t, ans, x: np.zeros_like(t), jvp_rule="np.zeros_like(t)",
    tf_jvp_rule="tf.zeros_like(t)",
)
unary(
    "round", lambda x: np.round(x), _zero, lambda tf, x: tf.round(x), "tf.round",
    "the nearest integer, halves to even (as TensorFlow and NumPy); its gradient is 0",
    rule="np.zeros_like(g)", tf_rule="tf.zeros_like(g)",
    jvp=lambda t, ans, x: np.zeros_like(t), jvp_rule="np.zeros_like(t)",
    tf_jvp_rule="tf.zeros_like(t)",
)
# fmt: on
