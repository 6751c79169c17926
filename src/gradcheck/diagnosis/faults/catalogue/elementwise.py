"""Faults of the elementwise ops' rules: signs, squares, the wrong operand."""

from __future__ import annotations

from operator import ge, le

import numpy as np

from ..rules import Fault, mask_without_g

# fmt: off
FAULTS: tuple[Fault, ...] = (
    Fault(
        "mul.self",
        "mul's VJP multiplies the upstream gradient by the argument itself instead of "
        "by the other operand",
        "d(a*b)/da is b: `g * b` for a and `g * a` for b",
        vjps={("mul", 0): lambda g, ans, a, b: g * a},
    ),
    Fault(
        "sub.sign",
        "sub's VJP for the second operand keeps the sign: it must be negated",
        "return `-g` for b in a - b",
        vjps={("sub", 1): lambda g, ans, a, b: g},
    ),
    Fault(
        "div.sign",
        "div's VJP for the denominator lost its minus sign",
        "d(a/b)/db is -a / b**2: `-g * a / b**2`",
        vjps={("div", 1): lambda g, ans, a, b: g * a / (b * b)},
    ),
    Fault(
        "div.square",
        "div's VJP for the denominator divides by b instead of b**2",
        "d(a/b)/db is -a / b**2: `-g * a / b**2`",
        vjps={("div", 1): lambda g, ans, a, b: -g * a / b},
    ),
    Fault(
        "div.numerator-self",
        "div's VJP for the numerator divides by the numerator a instead of the denominator b",
        "d(a/b)/da is 1/b: `g / b`",
        vjps={("div", 0): lambda g, ans, a, b: g / a},
        seen="apache/singa#484",
    ),
    Fault(
        "pow.exponent",
        "pow's VJP for the base keeps the exponent: it uses b * a**b instead of b * a**(b-1)",
        "d(a**b)/da is b * a**(b - 1): `g * b * a**(b - 1)`",
        vjps={("pow", 0): lambda g, ans, a, b: g * b * np.power(a, b)},
    ),
    Fault(
        "pow.divides-by-base",
        "pow's VJP for the base is computed as b * y / a from the output y, which is 0/0 = "
        "NaN where a == 0",
        "compute it without dividing by a: `g * b * a**(b - 1)`",
        vjps={("pow", 0): lambda g, ans, a, b: g * b * ans / a},
        seen="tinygrad/tinygrad#9075",
    ),
    Fault(
        "pow.power-rule-exponent",
        "pow's VJP for the exponent uses the power rule, a * b**(a - 1) as if b were the "
        "base, instead of the exponential rule a**b * log(a)",
        "d(a**b)/db is a**b * log(a): `g * a**b * np.log(a)` (0 where a <= 0)",
        vjps={("pow", 1): lambda g, ans, a, b: g * a * np.power(b, a - 1)},
        seen="tenstorrent/tt-metal#52144",
    ),
    Fault(
        "maximum.mask-only",
        "maximum/minimum's VJP returns the winner mask alone: the upstream gradient g is "
        "never multiplied in",
        "multiply the mask by g: `g * (a >= b)` for a (`g * (a <= b)` for minimum)",
        vjps={
            ("maximum", 0): mask_without_g(ge, True), ("maximum", 1): mask_without_g(ge, False),
            ("minimum", 0): mask_without_g(le, True), ("minimum", 1): mask_without_g(le, False),
        },
        seen="apache/singa#510",
    ),
    Fault(
        "maximum.inverted",
        "maximum/minimum's VJP gives the gradient to the argument that lost the comparison",
        "the winner gets g: `g * (a >= b)` for a and `g * ~(a >= b)` for b in maximum",
        vjps={
            ("maximum", 0): lambda g, ans, a, b: g * ~(a >= b),
            ("maximum", 1): lambda g, ans, a, b: g * (a >= b),
            ("minimum", 0): lambda g, ans, a, b: g * ~(a <= b),
            ("minimum", 1): lambda g, ans, a, b: g * (a <= b),
        },
        seen="tenstorrent/tt-metal#48201",
    ),
    Fault(
        "cos.sign",
        "cos's VJP lost its minus sign: it uses sin(x) where the derivative is -sin(x)",
        "d cos(x)/dx is -sin(x): `-g * np.sin(x)`",
        vjps={("cos", 0): lambda g, ans, x: g * np.sin(x)},
        seen="casadi/casadi#2585",
    ),
    Fault(
        "tanh.from-input",
        "tanh's VJP computes 1 - x**2 from the input instead of 1 - y**2 from the output",
        "use the output: `g * (1 - np.tanh(x)**2)`",
        vjps={("tanh", 0): lambda g, ans, x: g * (1 - x * x)},
    ),
    Fault(
        "sigmoid.from-input",
        "sigmoid's VJP computes x * (1 - x) from the input instead of s * (1 - s) from the output",
        "use the output s = sigmoid(x): `g * s * (1 - s)`",
        vjps={("sigmoid", 0): lambda g, ans, x: g * x * (1 - x)},
    ),
    Fault(
        "relu.kink",
        "relu's VJP passes the gradient at x == 0, where TensorFlow takes relu'(0) = 0",
        "use `g * (x > 0)`, not `g * (x >= 0)`",
        vjps={("relu", 0): lambda g, ans, x: g * (x >= 0)},
        seen="iamtrask/Grokking-Deep-Learning#13",
    ),
    Fault(
        "relu.gradient-mask",
        "relu's VJP zeroes the negative entries of the gradient (g > 0) instead of the "
        "entries where the input is negative (x > 0), as guided backprop does",
        "mask by the input: `g * (x > 0)`",
        vjps={("relu", 0): lambda g, ans, x: g * (g > 0)},
        seen="utkuozbulak/pytorch-cnn-visualizations#59",
    ),
    Fault(
        "log.inverted",
        "log's VJP multiplies by x instead of dividing by it",
        "d log(x)/dx is 1/x: `g / x`",
        vjps={("log", 0): lambda g, ans, x: g * x},
    ),
    Fault(
        "sqrt.no-half",
        "sqrt's VJP is missing the factor 1/2",
        "d sqrt(x)/dx is 0.5 / sqrt(x): `g * 0.5 / np.sqrt(x)`",
        vjps={("sqrt", 0): lambda g, ans, x: g / ans},
    ),
)
# fmt: on
