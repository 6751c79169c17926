"""Every registered op, checked on its own.

Each op is checked three ways on a table of cases (op, argument shapes, attributes,
input generator):

* its NumPy forward and shape rule against the TensorFlow builder's value;
* each VJP (after `unbroadcast`, as the engine applies it) against `tf.GradientTape`;
* each VJP against central finite differences, an oracle that owes nothing to TF.

Then TensorFlow's subgradient conventions at kinks and ties (against TF and against
the values SPEC §3 states), and the shape rules' errors. Everything runs in float64.
"""

from __future__ import annotations

import itertools
import math
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from gradcheck.ops import Op, ShapeError, all_ops, broadcast_shapes, get_op, unbroadcast

Shape = tuple[int, ...]
Gen = Callable[[np.random.Generator, Sequence[Shape]], list[np.ndarray]]

TF_TOL = {"rtol": 1e-10, "atol": 1e-12}  # same maths in float64, maybe in another order
FD_TOL = {"rtol": 1e-6, "atol": 1e-7}  # central differences, h = 1e-6
FD_STEP = 1e-6


# --- input generators: (rng, argument shapes) -> argument values -------------------


def _normal(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    return rng.standard_normal(shape)


def _positive(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Away from 0, for log, sqrt and pow's base."""
    return rng.uniform(0.5, 2.0, shape)


def _nonzero(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Either sign but at least 0.25 from 0, for relu, abs and divisors."""
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.25, 1.5, shape)


def each(*draws: Callable[[np.random.Generator, Shape], np.ndarray]) -> Gen:
    """Draw argument i with draws[i]; the last draw serves the remaining arguments."""

    def gen(rng: np.random.Generator, shapes: Sequence[Shape]) -> list[np.ndarray]:
        return [draws[min(i, len(draws) - 1)](rng, s) for i, s in enumerate(shapes)]

    return gen


def spaced(rng: np.random.Generator, shapes: Sequence[Shape]) -> list[np.ndarray]:
    """Values 0.25 apart, shuffled across all arguments: no ties within reach of h."""
    sizes = [math.prod(s) for s in shapes]
    pool = rng.permutation(sum(sizes)) * 0.25 - sum(sizes) * 0.125
    bounds = np.cumsum([0, *sizes])
    return [pool[lo:hi].reshape(s) for lo, hi, s in zip(bounds, bounds[1:], shapes, strict=False)]


def below(n: int) -> Callable[[np.random.Generator, Shape], np.ndarray]:
    """Integer indices in [0, n), repeats likely: a gather's adjoint must add them up."""
    return lambda rng, shape: rng.integers(0, n, shape)


def probabilities(axis: int) -> Callable[[np.random.Generator, Shape], np.ndarray]:
    """Positive values that sum to 1 along `axis`: softmax_cross_entropy's soft labels."""

    def draw(rng: np.random.Generator, shape: Shape) -> np.ndarray:
        p = rng.uniform(0.1, 1.0, shape)
        return p / p.sum(axis=axis, keepdims=True)

    return draw


def _between_jumps(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """k + [0.1, 0.4]: away from floor's and ceil's jumps (integers) and round's (halves)."""
    return rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.4, shape)


def _distinct_magnitudes(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Magnitudes 0.25 apart, random signs: no ties of |x| within reach of h."""
    n = math.prod(shape)
    return (rng.choice([-1.0, 1.0], n) * (rng.permutation(n) * 0.25 + 0.25)).reshape(shape)


def _dominant(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Square matrices, diagonally dominant: well-conditioned, for inv, det and the solvers."""
    return rng.standard_normal(shape) + (shape[-1] + 1) * np.eye(shape[-1])


def _spd(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Symmetric positive-definite matrices, well-conditioned, for cholesky."""
    m = rng.standard_normal(shape)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


NORMAL = each(_normal)
POSITIVE = each(_positive)
NONZERO = each(_nonzero)


# --- the case table -----------------------------------------------------------------


def _fmt_shape(shape: Shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


def _fmt_value(value: Any) -> str:
    if isinstance(value, tuple):  # a getitem index
        return "[" + ",".join(_fmt_value(v) for v in value) + "]"
    if isinstance(value, slice):
        parts = ["" if p is None else str(p) for p in (value.start, value.stop, value.step)]
        return ":".join(parts[:2] if value.step is None else parts)
    if value is Ellipsis:
        return "..."
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


@dataclass(frozen=True)
class Case:
    op: str
    shapes: tuple[Shape, ...]  # one per argument; one per list element for concat/stack
    attrs: dict[str, Any] = field(default_factory=dict)
    gen: Gen = NORMAL

    @property
    def id(self) -> str:
        shapes = ",".join(_fmt_shape(s) for s in self.shapes)
        attrs = "".join(f"-{k}={_fmt_value(v)}" for k, v in self.attrs.items())
        return f"{self.op}-{shapes}{attrs}"


def case(op: str, *shapes: Shape, gen: Gen = NORMAL, **attrs: Any) -> Case:
    return Case(op, tuple(shapes), attrs, gen)


BINARY_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 1), (3, 4)),
    ((2, 3, 4), (4,)),
    ((4, 1, 3), (2, 3)),
    ((), (2, 3)),
    ((2, 3), ()),
]
BINARY = {
    "add": NORMAL,
    "sub": NORMAL,
    "mul": NORMAL,
    "div": each(_normal, _nonzero),
    "pow": each(_positive, _normal),
    "maximum": spaced,
    "minimum": spaced,
}

UNARY_SHAPES = [(3, 4), (), (2, 1, 3)]
UNARY = {
    "neg": NORMAL,
    "exp": NORMAL,
    "log": POSITIVE,
    "sqrt": POSITIVE,
    "abs": NONZERO,
    "square": NORMAL,
    "sin": NORMAL,
    "cos": NORMAL,
    "tanh": NORMAL,
    "sigmoid": NORMAL,
    "relu": NONZERO,
}
# SPEC §3.1's unary ops (ops/unary.py)
MORE_UNARY = {
    "log1p": each(lambda rng, shape: rng.uniform(-0.5, 2.0, shape)),
    "expm1": NORMAL,
    "reciprocal": NONZERO,
    "rsqrt": POSITIVE,
    "tan": each(lambda rng, shape: rng.uniform(-1.2, 1.2, shape)),
    "erf": each(lambda rng, shape: 2 * rng.standard_normal(shape)),
    "softplus": NORMAL,
    "gelu": NORMAL,
    "leaky_relu": NONZERO,
    "elu": NONZERO,
    "selu": NONZERO,
    "silu": NORMAL,
    "sign": NONZERO,
    "floor": each(_between_jumps),
    "ceil": each(_between_jumps),
    "round": each(_between_jumps),
}

REDUCTION_CASES: list[tuple[Shape, dict[str, Any]]] = [
    ((2, 3, 4), {}),
    ((2, 3, 4), {"keepdims": True}),
    ((2, 3, 4), {"axis": 1}),
    ((2, 3, 4), {"axis": -1, "keepdims": True}),
    ((2, 3, 4), {"axis": [0, 2]}),
    ((2, 3, 4), {"axis": [-1, 0], "keepdims": True}),
    ((2, 3, 4), {"axis": [0, 1, 2]}),
    ((2, 3), {"axis": []}),
    ((5,), {"axis": 0}),
    ((), {}),
]
REDUCTIONS = {"sum": NORMAL, "mean": NORMAL, "max": spaced, "min": spaced, "logsumexp": NORMAL}
MORE_REDUCTIONS = {"prod": NORMAL, "var": NORMAL, "std": NORMAL}  # ops/cumulative, statistics
CUMULATIVE_CASES: list[tuple[Shape, dict[str, Any]]] = [
    ((3, 4), {}),
    ((3, 4), {"axis": 1, "exclusive": True}),
    ((2, 3, 4), {"axis": -1, "reverse": True}),
    ((2, 3, 4), {"axis": 1, "exclusive": True, "reverse": True}),
    ((5,), {}),
]
NORM_CASES: list[tuple[Shape, dict[str, Any]]] = [
    ((3, 4), {}),
    ((2, 3, 4), {"axis": 1}),
    ((2, 3, 4), {"ord": "fro", "axis": [1, 2]}),
    ((2, 3, 4), {"ord": "fro", "axis": [-1, 0], "keepdims": True}),
    ((2, 3, 4), {"ord": 1, "axis": -1, "keepdims": True}),
    ((3, 4), {"ord": 1}),
    ((3, 4), {"ord": "inf", "axis": 0}),
    ((5,), {"ord": "inf"}),
]

CASES: list[Case] = [
    *(case(op, *shapes, gen=gen) for op, gen in BINARY.items() for shapes in BINARY_SHAPES),
    *(case(op, shape, gen=gen) for op, gen in UNARY.items() for shape in UNARY_SHAPES),
    *(case(op, shape, gen=gen) for op, gen in MORE_UNARY.items() for shape in UNARY_SHAPES),
    case("gelu", (3, 4), approximate=True),
    case("leaky_relu", (3, 4), gen=NONZERO, alpha=0.01),
    case("elu", (3, 4), gen=NONZERO, alpha=0.5),
    *(
        case(op, shape, gen=gen, **attrs)
        for op, gen in REDUCTIONS.items()
        for shape, attrs in REDUCTION_CASES
    ),
    *(
        case(op, shape, gen=gen, **attrs)
        for op, gen in MORE_REDUCTIONS.items()
        for shape, attrs in REDUCTION_CASES
        # std over one element is 0, where it has no gradient
        if not (op == "std" and (shape == () or attrs.get("axis") == []))
    ),
    *(case("norm", shape, gen=each(_distinct_magnitudes), **attrs) for shape, attrs in NORM_CASES),
    *(
        case(op, shape, gen=NONZERO, **attrs)
        for op in ("cumsum", "cumprod")
        for shape, attrs in CUMULATIVE_CASES
    ),
    # matmul: plain, batched, batch axes broadcast (one side, size-1 axes, different ranks)
    case("matmul", (3, 4), (4, 5)),
    case("matmul", (2, 3, 4), (4, 5)),
    case("matmul", (3, 4), (2, 4, 5)),
    case("matmul", (2, 3, 4), (2, 4, 1)),
    case("matmul", (2, 1, 3, 4), (5, 4, 2)),
    case("matmul", (1, 3, 2), (4, 2, 3)),
    case("dot", (4,), (4,)),
    case("dot", (1,), (1,)),
    case("dot", (6,), (6,)),
    case("outer", (3,), (4,)),
    case("outer", (1,), (2,)),
    case("outer", (4,), (4,)),
    case("trace", (3, 3)),
    case("trace", (2, 3, 4)),
    case("trace", (2, 1, 4, 2)),
    case("diag_part", (3, 3)),
    case("diag_part", (2, 3, 4)),
    case("diag_part", (2, 4, 2)),
    # contractions: tensordot's axes as an int and as pairs; einsum with repeated indices
    case("tensordot", (2, 3, 4), (3, 4, 5), axes=2),
    case("tensordot", (2, 3, 4), (4, 5, 2), axes=[[2, 0], [0, 2]]),
    case("tensordot", (3,), (2, 2), axes=0),
    case("tensordot", (2, 3), (4, 3), axes=[-1, -1]),
    case("einsum", (3, 4), (4, 2), equation="ij,jk->ki"),
    case("einsum", (4, 4), equation="ii->i"),
    case("einsum", (3, 3), equation="ii->"),
    case("einsum", (3, 3), (3, 2), equation="ii,ij->j"),
    case("einsum", (2, 2, 3), (4,), equation="iij,k->kj"),
    case("einsum", (2, 3, 4), (2, 4, 2), (2, 2), equation="bij,bjk,bk->bi"),
    case("einsum", (3, 4), (4,), equation="ij,j"),
    # inverses and solvers, on well-conditioned matrices (singular-adjacent ones left out)
    case("inv", (3, 3), gen=each(_dominant)),
    case("inv", (2, 3, 3), gen=each(_dominant)),
    case("inv", (1, 1), gen=each(_dominant)),
    case("det", (3, 3), gen=each(_dominant)),
    case("det", (2, 2, 3, 3), gen=each(_dominant)),
    case("det", (2, 1, 1), gen=each(_dominant)),
    case("slogdet", (3, 3), gen=each(_dominant)),
    case("slogdet", (2, 2, 3, 3), gen=each(_dominant)),
    case("slogdet", (2, 1, 1), gen=each(_nonzero)),
    case("slogdet", (4, 2, 2), gen=each(_nonzero)),
    case("solve", (3, 3), (3, 2), gen=each(_dominant, _normal)),
    case("solve", (2, 3, 3), (2, 3, 1), gen=each(_dominant, _normal)),
    case("solve", (2, 2), (2, 4), gen=each(_dominant, _normal)),
    case("cholesky", (3, 3), gen=each(_spd)),
    case("cholesky", (2, 3, 3), gen=each(_spd)),
    case("cholesky", (1, 1), gen=each(_spd)),
    case("triangular_solve", (3, 3), (3, 2), gen=each(_dominant, _normal)),
    case("triangular_solve", (2, 3, 3), (3, 2), gen=each(_dominant, _normal), lower=False),
    case("triangular_solve", (3, 3), (2, 3, 1), gen=each(_dominant, _normal)),
    case("triangular_solve", (1, 2, 2), (3, 2, 2), gen=each(_dominant, _normal), lower=False),
    # nn
    *(
        case(op, shape, **attrs)
        for op in ("softmax", "log_softmax")
        for shape, attrs in [
            ((2, 3, 4), {}),
            ((2, 3, 4), {"axis": 0}),
            ((2, 3, 4), {"axis": -2}),
            ((5,), {}),
            ((3, 1), {"axis": 1}),
        ]
    ),
    # convolutions: stride > kernel, SAME with an even kernel, dilation, groups, depthwise,
    # explicit and int pads, the channels-first and PyTorch filter layouts, conv1d, transpose
    case("conv2d", (2, 5, 5, 3), (3, 3, 3, 2)),
    case("conv2d", (1, 7, 7, 2), (2, 2, 2, 3), strides=3),
    case("conv2d", (2, 6, 5, 2), (2, 2, 2, 3), padding="SAME", strides=2),
    case("conv2d", (1, 7, 6, 2), (3, 2, 2, 2), padding="SAME", dilations=[2, 1]),
    case("conv2d", (1, 5, 5, 4), (3, 3, 2, 4), groups=2, padding=[[1, 0], [2, 1]]),
    case("conv2d", (1, 5, 4, 3), (3, 3, 1, 3), groups=3, padding=1, strides=[2, 1]),
    case(
        "conv2d",
        (2, 4, 5, 5),
        (4, 2, 3, 3),
        groups=2,
        padding="SAME",
        data_format="NCHW",
        filter_format="OIHW",
    ),
    case("conv1d", (2, 7, 3), (3, 3, 2)),
    case("conv1d", (2, 9, 2), (2, 2, 3), strides=2, padding="SAME"),
    case(
        "conv1d",
        (2, 3, 8),
        (4, 3, 3),
        data_format="NCW",
        filter_format="OIW",
        dilations=2,
        padding=[[2, 1]],
    ),
    case("conv1d", (1, 6, 4), (3, 1, 4), groups=4, padding=1),
    case("conv2d_transpose", (2, 3, 3, 3), (3, 3, 2, 3), output_shape=[2, 6, 6, 2], strides=2),
    case(
        "conv2d_transpose",
        (1, 3, 3, 2),
        (3, 3, 2, 2),
        output_shape=[1, 7, 7, 2],
        strides=2,
        padding="VALID",
    ),
    case(
        "conv2d_transpose",
        (1, 2, 3, 3),
        (2, 2, 3, 2),
        output_shape=[1, 3, 5, 5],
        strides=2,
        data_format="NCHW",
    ),
    case("conv2d_transpose", (1, 4, 4, 2), (2, 3, 1, 2), output_shape=[1, 4, 4, 1]),
    # comparisons (values apart: a comparison is a step), where, clip (off its bounds)
    *(
        case(op, *shapes, gen=spaced)
        for op in ("greater", "greater_equal", "less", "less_equal", "equal", "not_equal")
        for shapes in [((3, 4), (3, 4)), ((3, 1), (4,)), ((), (2, 3))]
    ),
    case("where", (3, 4), (3, 4), (3, 4), gen=spaced),
    case("where", (3, 1), (4,), (), gen=spaced),
    case("where", (), (2, 3), (2, 1), gen=spaced),
    case("clip", (3, 4), gen=spaced, lo=-0.6, hi=0.8),
    case("clip", (5,), gen=spaced, lo=0, hi=0.3),
    case("clip", (), gen=spaced, lo=-2.0, hi=2.0),
    # gathers: integer indices, repeated and out of order
    case("take", (5, 3), (7,), gen=each(_normal, below(5))),
    case("take", (2, 5, 3), (2, 4), gen=each(_normal, below(5)), axis=1),
    case("take", (4, 3), (), gen=each(_normal, below(3)), axis=-1),
    case("take", (6,), (3, 4), gen=each(_normal, below(6))),
    case("take_along_axis", (3, 4), (3, 6), gen=each(_normal, below(4)), axis=1),
    case("take_along_axis", (3, 4, 2), (5, 4, 2), gen=each(_normal, below(3)), axis=0),
    case("take_along_axis", (3, 4), (3, 1), gen=each(_normal, below(4))),
    case("embedding", (6, 4), (5,), gen=each(_normal, below(6))),
    case("embedding", (6, 4), (2, 3), gen=each(_normal, below(6))),
    case("embedding", (3,), (4,), gen=each(_normal, below(3))),
    case("sparse_softmax_cross_entropy", (4, 5), (4,), gen=each(_normal, below(5))),
    case("sparse_softmax_cross_entropy", (2, 3, 4), (2, 3), gen=each(_normal, below(4))),
    case("sparse_softmax_cross_entropy", (3,), (), gen=each(_normal, below(3))),
    case("one_hot", (5,), gen=each(below(3)), depth=3, dtype="float64"),
    case("one_hot", (2, 3), gen=each(below(4)), depth=4, dtype="float64"),
    case("one_hot", (), gen=each(below(2)), depth=2, dtype="float64"),
    # pooling: values 0.25 apart (spaced), so no window holds a tie within reach of h
    case("max_pool2d", (2, 4, 4, 3), gen=spaced, ksize=2),
    case("max_pool2d", (1, 5, 5, 2), gen=spaced, ksize=3, strides=1),  # overlapping
    case("max_pool2d", (1, 5, 6, 2), gen=spaced, ksize=[2, 3], strides=[1, 2], padding="SAME"),
    case("max_pool2d", (1, 6, 6, 1), gen=spaced, ksize=2, strides=3),  # stride > ksize
    case(
        "max_pool2d",
        (2, 2, 5, 5),
        gen=spaced,
        ksize=2,
        strides=2,
        padding="SAME",
        data_format="NCHW",
    ),
    case("avg_pool2d", (2, 4, 4, 3), ksize=2),
    case("avg_pool2d", (1, 5, 5, 2), ksize=3, strides=1, padding="SAME"),
    case("avg_pool2d", (1, 5, 6, 2), ksize=[2, 4], strides=[2, 1], padding="SAME"),
    case("avg_pool2d", (2, 3, 5, 4), ksize=3, strides=2, padding="SAME", data_format="NCHW"),
    case("max_pool1d", (2, 7, 3), gen=spaced, ksize=3, strides=2),
    case("max_pool1d", (1, 6, 2), gen=spaced, ksize=2, strides=1, padding="SAME"),
    case(
        "max_pool1d", (2, 3, 7), gen=spaced, ksize=4, strides=2, padding="SAME", data_format="NCW"
    ),
    case("avg_pool1d", (2, 7, 3), ksize=3, strides=2),
    case("avg_pool1d", (1, 6, 2), ksize=4, strides=1, padding="SAME"),
    case("avg_pool1d", (2, 3, 7), ksize=2, padding="SAME", data_format="NCW"),
    # normalisation; softmax_cross_entropy's labels are probabilities along its axis
    case("layer_norm", (3, 5)),
    case("layer_norm", (2, 3, 4), axis=[-2, -1]),
    case("layer_norm", (4, 3), axis=0, epsilon=1e-3),
    case("batch_norm", (6, 3)),
    case("batch_norm", (2, 3, 3, 2), axis=[0, 1, 2]),
    case("batch_norm", (5,), axis=0, epsilon=0.1),
    case("softmax_cross_entropy", (4, 5), (4, 5), gen=each(_normal, probabilities(-1))),
    case(
        "softmax_cross_entropy", (3, 2, 4), (3, 2, 4), gen=each(_normal, probabilities(0)), axis=0
    ),
    case("softmax_cross_entropy", (3,), (3,), gen=each(_normal, probabilities(-1))),
    # shape ops
    case("reshape", (2, 3, 4), shape=[6, 4]),
    case("reshape", (2, 3, 4), shape=[-1]),
    case("reshape", (2, 3, 4), shape=[4, -1, 2]),
    case("reshape", (6,), shape=[2, 1, 3]),
    case("reshape", (), shape=[1, 1]),
    case("reshape", (1, 1), shape=[]),
    case("transpose", (2, 3, 4)),
    case("transpose", (2, 3, 4), perm=[1, 0, 2]),
    case("transpose", (2, 3, 4), perm=[2, 0, 1]),
    case("transpose", (2, 3, 4, 5), perm=[3, 1, 0, 2]),
    case("transpose", (3, 4)),
    case("transpose", (5,)),
    case("flip", (3, 4), axis=0),
    case("flip", (2, 3, 4), axis=[0, -1]),
    case("flip", (5,), axis=-1),
    case("swapaxes", (2, 3, 4), axis1=0, axis2=2),
    case("swapaxes", (3, 4), axis1=-1, axis2=0),
    case("swapaxes", (2, 3), axis1=1, axis2=1),
    # ops/layout.py: pad's mirrored borders (reflect up to size - 1, symmetric up to size)
    case("pad", (2, 3), paddings=[[1, 0], [2, 2]], mode="reflect"),
    case("pad", (3, 2), paddings=[[3, 1], [0, 2]], mode="symmetric"),
    case("pad", (2, 1, 3), paddings=[[0, 0], [1, 1], [2, 0]], mode="symmetric"),
    case("pad", (2, 3), paddings=[[0, 2], [1, 0]], constant_values=1.5),
    case("pad", (4,), paddings=[[3, 3]], mode="reflect"),
    case("pad", (), paddings=[]),
    case("tile", (2, 3), reps=[2, 3]),
    case("tile", (2, 1, 3), reps=[1, 3, 1]),
    case("tile", (3,), reps=[1]),
    case("repeat", (2, 3), repeats=2),
    case("repeat", (2, 3), repeats=[2, 0, 1], axis=-1),
    case("repeat", (2, 3), repeats=[1, 3, 0, 1, 2, 1]),
    case("repeat", (3, 2), repeats=3, axis=0),
    case("roll", (2, 3), shift=4),
    case("roll", (2, 3, 4), shift=[1, -2], axis=[0, 2]),
    case("roll", (5,), shift=-1, axis=0),
    case("dilate", (2, 3), axes=[0, -1], dilation=1),
    case("dilate", (2, 3), axes=1, dilation=2),
    case("dilate", (3,), axes=0, dilation=0),
    case("undilate", (5, 3), axes=[0, 1], dilation=1),
    case("undilate", (2, 7), axes=-1, dilation=2),
    case("undilate", (6,), axes=0, dilation=1),
    case("matrix_transpose", (3, 4)),
    case("matrix_transpose", (2, 3, 4)),
    case("matrix_transpose", (2, 1, 3, 4)),
    case("expand_dims", (2, 3)),
    case("expand_dims", (2, 3), axis=2),
    case("expand_dims", (2, 3), axis=-1),
    case("expand_dims", (2, 3), axis=-3),
    case("expand_dims", (), axis=0),
    case("squeeze", (1, 3, 1, 2)),
    case("squeeze", (1, 3, 1, 2), axis=0),
    case("squeeze", (1, 3, 1, 2), axis=-2),
    case("squeeze", (1, 3, 1, 2), axis=[0, 2]),
    case("squeeze", (1, 3, 1, 2), axis=[]),
    case("squeeze", (1,)),
    case("squeeze", (3, 2)),
    case("broadcast_to", (3, 1), shape=[2, 3, 4]),
    case("broadcast_to", (4,), shape=[3, 4]),
    case("broadcast_to", (), shape=[2, 2]),
    case("broadcast_to", (2, 1, 3), shape=[2, 4, 3]),
    case("broadcast_to", (1, 3), shape=[1, 3]),
    case("concat", (2, 3), (4, 3)),
    case("concat", (2, 3), (2, 1), (2, 2), axis=1),
    case("concat", (2, 3), (2, 2), axis=-1),
    case("concat", (2, 3, 4), (2, 1, 4), (2, 2, 4), axis=1),
    case("concat", (2, 3, 4), (2, 3, 4), axis=-3),
    case("concat", (3,)),
    case("stack", (2, 3), (2, 3)),
    case("stack", (2, 3), (2, 3), (2, 3), axis=1),
    case("stack", (2, 3), (2, 3), axis=2),
    case("stack", (2, 3), (2, 3), (2, 3), axis=-1),
    case("stack", (2, 3), (2, 3), axis=-3),
    case("stack", (), (), ()),
    case("split", (6, 2), num_or_sizes=3),
    case("split", (2, 6), num_or_sizes=[1, 3, -1], axis=1),
    case("split", (2, 3, 4), num_or_sizes=[2, 0, 2], axis=-1),
    case("split", (4,), num_or_sizes=1),
    case("unstack", (3, 2)),
    case("unstack", (2, 3, 2), axis=1),
    case("unstack", (2, 3), axis=-1),
    case("unstack", (1, 4)),
    *(
        case("getitem", (3, 4, 5), index=index)
        for index in [
            (1,),
            (-1,),
            (0, 1, 2),
            (0, slice(1, 3), -2),
            (slice(None, None, 2),),
            (slice(1, None), slice(None, None, -1)),
            (slice(4, 0, -2), slice(-3, None)),
            (Ellipsis, 0),
            (Ellipsis, slice(None, None, 2)),
            (None,),
            (None, Ellipsis, None),
            (slice(None, None, -2), None, 1),
            (1, Ellipsis, slice(1, -1)),
            (),
        ]
    ),
]
PARAMS = [pytest.param(c, id=c.id) for c in CASES]


# --- calling an op uniformly (variadic ops take one list) ---------------------------


def _args(case: Case) -> tuple[Op, dict[str, Any], list[np.ndarray], np.random.Generator]:
    op = get_op(case.op)
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    args = [a if is_integer(a) else np.asarray(a, np.float64) for a in case.gen(rng, case.shapes)]
    assert [a.shape for a in args] == list(case.shapes)
    return op, op.resolve_attrs(case.attrs), args, rng


def is_integer(a: np.ndarray) -> bool:
    return np.asarray(a).dtype.kind in "iu"


def differentiable(op: Op, args: Sequence[np.ndarray]) -> list[int]:
    """The arguments with a gradient: all but the integer ones (indices, labels)."""
    return [i for i, a in enumerate(args) if not is_integer(a)]


def op_shape(op: Op, shapes: Sequence[Shape], attrs: dict[str, Any]) -> Shape:
    return op.shape(list(shapes), **attrs) if op.variadic else op.shape(*shapes, **attrs)


def op_forward(op: Op, args: Sequence[np.ndarray], attrs: dict[str, Any]) -> Any:
    """The op's value: an array, or for an op with several outputs (split) a tuple."""
    out = op.forward(list(args), **attrs) if op.variadic else op.forward(*args, **attrs)
    return tuple(map(np.asarray, out)) if op.multi else np.asarray(out)


def each_output(value: Any) -> list[np.ndarray]:
    """An op's value as a list of its outputs (one for most ops)."""
    return list(value) if isinstance(value, tuple) else [value]


def random_cotangent(rng: np.random.Generator, ans: Any) -> Any:
    """A random cotangent for each output, in the value's structure."""
    cots = [rng.standard_normal(a.shape) for a in each_output(ans)]
    return tuple(cots) if isinstance(ans, tuple) else cots[0]


def op_vjp(op: Op, i: int, g: Any, ans: Any, args: Sequence[np.ndarray], attrs: dict) -> np.ndarray:
    """The gradient for argument i, summed back to its shape as the engine does."""
    if op.variadic:
        raw = op.vjps[0](g, ans, list(args), i, **attrs)
    else:
        raw = op.vjps[i](g, ans, *args, **attrs)
    return unbroadcast(np.asarray(raw), args[i].shape)


def tf_value_and_grads(
    op: Op, args: Sequence[np.ndarray], attrs: dict[str, Any], cotangent: Any
) -> tuple[Any, list[np.ndarray]]:
    """TensorFlow's value and `tape.gradient` for every argument (cotangent None: ones);
    for an op with several outputs, a tuple of values and a cotangent each."""
    xs = [tf.constant(a) if is_integer(a) else tf.constant(a, dtype=tf.float64) for a in args]
    with tf.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        out = op.tf(tf, xs, **attrs) if op.variadic else op.tf(tf, *xs, **attrs)
    outs = list(out) if op.multi else [out]
    assert all(o.dtype == tf.float64 for o in outs)
    cots = (
        [tf.ones_like(o) for o in outs]
        if cotangent is None
        else [tf.constant(c, dtype=tf.float64) for c in each_output(cotangent)]
    )
    grads = tape.gradient(
        outs, xs, output_gradients=cots, unconnected_gradients=tf.UnconnectedGradients.ZERO
    )
    values = tuple(o.numpy() for o in outs) if op.multi else outs[0].numpy()
    return values, [None if g is None else tf.convert_to_tensor(g).numpy() for g in grads]


def fd_vjp(
    op: Op, i: int, cot: Any, args: Sequence[np.ndarray], attrs: dict[str, Any]
) -> np.ndarray:
    """vdot(cot, f(x + h e_j) - f(x - h e_j)) / 2h for every element j of argument i."""
    grad = np.zeros_like(args[i])
    for j in np.ndindex(args[i].shape):
        plus, minus = [a.copy() for a in args], [a.copy() for a in args]
        plus[i][j] += FD_STEP
        minus[i][j] -= FD_STEP
        ups = each_output(op_forward(op, symmetrised(op, plus), attrs))
        downs = each_output(op_forward(op, symmetrised(op, minus), attrs))
        change = sum(
            np.vdot(c, u - d) for c, u, d in zip(each_output(cot), ups, downs, strict=True)
        )
        grad[j] = change / (2 * FD_STEP)
    return grad


def symmetrised(op: Op, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The arguments an op reads as symmetric matrices (cholesky's) as (x + x^T) / 2, as the
    numeric reference reads them: a step in one element moves its mirror too, so that the
    differences are the symmetrised gradient, TensorFlow's."""
    out = list(args)
    for param in op.symmetric:
        k = op.params.index(param)
        out[k] = (out[k] + np.swapaxes(out[k], -1, -2)) / 2
    return out


# --- coverage -------------------------------------------------------------------------


def test_every_registered_op_has_cases() -> None:
    """A newly registered op without a row in CASES fails here."""
    assert {c.op for c in CASES} == {op.name for op in all_ops()}


def test_every_op_has_several_cases() -> None:
    counts = {name: sum(c.op == name for c in CASES) for name in {c.op for c in CASES}}
    assert all(n >= 3 for n in counts.values()), counts


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


# --- forward, VJP vs TensorFlow, VJP vs finite differences ----------------------------


@pytest.mark.parametrize("case", PARAMS)
def test_forward_and_shape_match_tensorflow(case: Case) -> None:
    op, attrs, args, _ = _args(case)
    ans = op_forward(op, args, attrs)
    want, _ = tf_value_and_grads(op, args, attrs, None)
    shapes = op_shape(op, case.shapes, attrs)
    if op.multi:  # several outputs: a shape and a value each
        assert len(shapes) == len(ans) == len(want) == op.outputs(*case.shapes, **attrs)
    else:
        shapes, ans, want = [shapes], [ans], [want]
    for shape, got, expected in zip(shapes, ans, want, strict=True):
        assert tuple(shape) == got.shape == expected.shape
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, expected, **TF_TOL)


@pytest.mark.parametrize("case", PARAMS)
def test_vjps_match_tensorflow(case: Case) -> None:
    op, attrs, args, rng = _args(case)
    ans = op_forward(op, args, attrs)
    cot = random_cotangent(rng, ans)
    _, want = tf_value_and_grads(op, args, attrs, cot)
    for i in differentiable(op, args):
        arg = args[i]
        got = op_vjp(op, i, cot, ans, args, attrs)
        assert got.shape == arg.shape, f"argument {i}"
        np.testing.assert_allclose(got, want[i], **TF_TOL, err_msg=f"argument {i}")


@pytest.mark.parametrize("case", PARAMS)
def test_vjps_match_finite_differences(case: Case) -> None:
    op, attrs, args, rng = _args(case)
    ans = op_forward(op, args, attrs)
    cot = random_cotangent(rng, ans)
    for i in differentiable(op, args):
        got = op_vjp(op, i, cot, ans, args, attrs)
        want = fd_vjp(op, i, cot, args, attrs)
        np.testing.assert_allclose(got, want, **FD_TOL, err_msg=f"argument {i}")


# --- subgradient conventions at kinks and ties (against TF, not FD) -------------------


@dataclass(frozen=True)
class Kink:
    op: str
    name: str
    args: tuple[Any, ...]  # literal argument values
    expect: tuple[Any, ...]  # each argument's gradient with a cotangent of ones
    attrs: dict[str, Any] = field(default_factory=dict)


KINKS = [
    Kink("relu", "relu'(0)=0", ([-1.0, -0.0, 0.0, 2.0],), ([0.0, 0.0, 0.0, 1.0],)),
    Kink(
        "clip",
        "bounds-pass",
        ([-2.0, -1.0, 0.5, 1.5, 3.0],),
        ([0.0, 1.0, 1.0, 1.0, 0.0],),
        {"lo": -1.0, "hi": 1.5},
    ),
    Kink("abs", "abs'(0)=0", ([-1.5, -0.0, 0.0, 2.0],), ([-1.0, 0.0, 0.0, 1.0],)),
    Kink(
        "maximum",
        "ties-to-a",
        ([1.0, 2.0, 3.0, -1.0], [1.0, 0.0, 3.0, 5.0]),
        ([1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]),
    ),
    Kink(
        "maximum",
        "broadcast-ties-to-a",
        ([[1.0], [2.0]], [1.0, 2.0, 1.0]),
        ([[2.0], [3.0]], [0.0, 1.0, 0.0]),
    ),
    Kink(
        "maximum",
        "nan",
        ([np.nan, 1.0, 2.0], [1.0, np.nan, 2.0]),
        ([0.0, 0.0, 1.0], [1.0, 1.0, 0.0]),
    ),
    Kink(
        "minimum",
        "ties-to-a",
        ([1.0, 2.0, 3.0, 6.0], [1.0, 5.0, 3.0, 5.0]),
        ([1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]),
    ),
    Kink(
        "minimum",
        "broadcast-ties-to-a",
        ([[1.0], [2.0]], [1.0, 2.0, 1.0]),
        ([[3.0], [1.0]], [1.0, 0.0, 1.0]),
    ),
    Kink(
        "minimum",
        "nan",
        ([np.nan, 1.0, 2.0], [1.0, np.nan, 2.0]),
        ([0.0, 0.0, 1.0], [1.0, 1.0, 0.0]),
    ),
    Kink(
        "max",
        "ties-split-rows",
        ([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]],),
        ([[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]],),
        {"axis": 1},
    ),
    Kink(
        "max",
        "ties-split-all",
        ([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]],),
        ([[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]],),
    ),
    Kink(
        "max",
        "ties-split-keepdims",
        ([[1.0, 3.0, 3.0], [2.0, 3.0, 2.0]],),
        ([[0.0, 0.5, 1.0], [1.0, 0.5, 0.0]],),
        {"axis": 0, "keepdims": True},
    ),
    Kink(
        "min",
        "ties-split-rows",
        ([[1.0, 1.0, 3.0], [2.0, 2.0, 2.0]],),
        ([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]],),
        {"axis": -1},
    ),
    Kink(
        "min",
        "all-equal",
        ([[2.0, 2.0], [2.0, 2.0]],),
        ([[0.25, 0.25], [0.25, 0.25]],),
        {"axis": [0, 1]},
    ),
    Kink(
        # TensorFlow gives a window's gradient to its first maximum in row-major order;
        # overlapping windows (3x3, stride 1) each add theirs to the same first maximum.
        "max_pool2d",
        "ties-first",
        (
            [
                [
                    [[1.0], [3.0], [3.0], [2.0]],
                    [[3.0], [0.0], [1.0], [3.0]],
                    [[2.0], [2.0], [2.0], [2.0]],
                    [[0.0], [5.0], [5.0], [0.0]],
                ]
            ],
        ),
        (
            [
                [
                    [[0.0], [1.0], [1.0], [0.0]],
                    [[0.0], [0.0], [0.0], [0.0]],
                    [[0.0], [0.0], [0.0], [0.0]],
                    [[0.0], [1.0], [1.0], [0.0]],
                ]
            ],
        ),
        {"ksize": 2},
    ),
    Kink(
        "max_pool2d",
        "overlapping-ties-first",
        (
            [
                [
                    [[1.0], [3.0], [3.0], [2.0]],
                    [[3.0], [0.0], [1.0], [3.0]],
                    [[2.0], [2.0], [2.0], [2.0]],
                    [[0.0], [5.0], [5.0], [0.0]],
                ]
            ],
        ),
        (
            [
                [
                    [[0.0], [2.0], [0.0], [0.0]],
                    [[0.0], [0.0], [0.0], [0.0]],
                    [[0.0], [0.0], [0.0], [0.0]],
                    [[0.0], [2.0], [0.0], [0.0]],
                ]
            ],
        ),
        {"ksize": 3, "strides": 1},
    ),
    Kink(
        "max_pool1d",
        "same-ties-first",
        ([[[1.0], [1.0], [2.0], [2.0], [0.0]]],),
        ([[[1.0], [0.0], [2.0], [1.0], [1.0]]],),
        {"ksize": 2, "strides": 1, "padding": "SAME"},
    ),
    Kink("leaky_relu", "slope-alpha-at-0", ([-1.0, 0.0, 2.0],), ([0.2, 0.2, 1.0],)),
    Kink(
        "elu",
        "negative-branch-at-0",
        ([-1.0, 0.0, 2.0],),
        ([0.5 * math.exp(-1), 0.5, 1.0],),
        {"alpha": 0.5},
    ),
    Kink(
        "selu",
        "positive-branch-at-0",
        ([-1.0, 0.0, 2.0],),
        ([1.7580993408473766 * math.exp(-1), 1.0507009873554805, 1.0507009873554805],),
    ),
    Kink("sign", "zero-everywhere", ([-1.0, 0.0, 2.0],), ([0.0, 0.0, 0.0],)),
    Kink(
        # The exponent's gradient is 0 where base <= 0 (NaN where the power is NaN);
        # the base's gradient follows b * a ** (b - 1), inf and NaN included.
        "pow",
        "base<=0",
        ([-2.0, -1.0, 0.0, 0.0, 0.0, 1.5, -1.0], [2.0, 3.0, 2.0, 0.5, 0.0, 1.0, 0.5]),
        (
            [-4.0, 3.0, 0.0, np.inf, np.nan, 1.0, np.nan],
            [0.0, 0.0, 0.0, 0.0, 0.0, 1.5 * np.log(1.5), np.nan],
        ),
    ),
]


@pytest.mark.parametrize("kink", [pytest.param(k, id=f"{k.op}-{k.name}") for k in KINKS])
def test_subgradient_conventions_match_tensorflow(kink: Kink) -> None:
    op = get_op(kink.op)
    attrs = op.resolve_attrs(kink.attrs)
    args = [np.asarray(a, dtype=np.float64) for a in kink.args]
    with np.errstate(all="ignore"):
        ans = op_forward(op, args, attrs)
        got = [op_vjp(op, i, np.ones_like(ans), ans, args, attrs) for i in range(len(args))]
    want_ans, want = tf_value_and_grads(op, args, attrs, None)
    np.testing.assert_allclose(ans, want_ans, **TF_TOL)
    for i in range(len(args)):
        np.testing.assert_allclose(got[i], want[i], **TF_TOL, err_msg=f"vs TF, argument {i}")
        np.testing.assert_allclose(got[i], kink.expect[i], **TF_TOL, err_msg=f"argument {i}")


def test_every_kink_op_has_kink_cases() -> None:
    assert {op.name for op in all_ops() if op.kink} <= {k.op for k in KINKS}


# --- shape-rule errors ----------------------------------------------------------------

SHAPE_ERRORS = [
    # (op, argument shapes, attrs, message)
    ("matmul", [(2, 3, 4), (3, 5)], {}, "inner dimensions 4 and 3 differ"),
    ("matmul", [(3,), (3, 4)], {}, "needs rank >= 2 on both sides, got shapes (3,) and (3, 4)"),
    ("matmul", [(2, 3, 4), (3, 4, 5)], {}, "batch axes: shapes (2,) and (3,) do not broadcast"),
    ("add", [(3, 4), (4, 3)], {}, "shapes (3, 4) and (4, 3) do not broadcast"),
    ("dot", [(2, 3), (3,)], {}, "dot is the inner product of two 1-D arrays, got shapes (2, 3)"),
    ("dot", [(3,), (4,)], {}, "lengths 3 and 4 differ"),
    ("outer", [(3,), ()], {}, "outer takes two 1-D arrays, got shapes (3,) and ()"),
    ("trace", [(3,)], {}, "needs rank >= 2 (it acts on the last two axes), got shape (3,)"),
    ("diag_part", [()], {}, "needs rank >= 2 (it acts on the last two axes), got shape ()"),
    ("maximum", [(2, 3), (2,)], {}, "shapes (2, 3) and (2,) do not broadcast"),
    ("transpose", [(2, 3, 4)], {"perm": [1, 0]}, "perm [1, 0] is not a permutation of the 3 axes"),
    ("transpose", [(2, 3)], {"perm": [0, 0]}, "perm [0, 0] is not a permutation of the 2 axes"),
    ("transpose", [(2, 3)], {"perm": 1}, "perm must be a list of integers, got 1"),
    ("matrix_transpose", [(3,)], {}, "needs rank >= 2, got shape (3,)"),
    ("flip", [(2, 3)], {}, "axis must be an integer or a list of integers, got None"),
    ("flip", [(2, 3)], {"axis": [0, 2]}, "axis 2 is out of range for rank 2"),
    ("swapaxes", [(2, 3)], {"axis1": 0, "axis2": 2}, "axis2 2 is out of range for rank 2"),
    ("swapaxes", [(2, 3)], {"axis2": 0}, "axis1 must be an integer, got None"),
    ("pad", [(2, 3)], {"paddings": [1, 1]}, "paddings must be one [before, after] pair per axis"),
    ("pad", [(2, 3)], {"paddings": [[1, 1]]}, "paddings has 1 pairs; x (2, 3) has 2 axes"),
    ("pad", [(2, 3)], {"paddings": [[1, 1], [0, -1]]}, "paddings[1] is [0, -1]: a pad must be"),
    ("pad", [(2, 3)], {"paddings": [[1], [0, 1]]}, "paddings[0] must be a [before, after] pair"),
    (
        "pad",
        [(1, 3)],
        {"paddings": [[1, 1], [0, 0]], "mode": "reflect"},
        "paddings[0] is [1, 1]: mode 'reflect' pads less than the size of the axis, 1 (at most 0)",
    ),
    (
        "pad",
        [(2, 3)],
        {"paddings": [[0, 0], [0, 4]], "mode": "symmetric"},
        "paddings[1] is [0, 4]: mode 'symmetric' pads at most the size of the axis, 3 (at most 3)",
    ),
    (
        "pad",
        [(2, 3)],
        {"paddings": [[0, 0], [0, 1]], "mode": "REFLECT"},
        "mode must be 'constant', 'reflect' or 'symmetric', got 'REFLECT'",
    ),
    (
        "pad",
        [(2, 3)],
        {"paddings": [[0, 0], [0, 1]], "mode": "reflect", "constant_values": 1},
        "constant_values applies to mode 'constant' only, not 'reflect'",
    ),
    ("tile", [(2, 3)], {"reps": [2]}, "reps [2] has 1 entries; x (2, 3) has 2 axes"),
    ("tile", [(2, 3)], {"reps": 2}, "reps must be a list of integers, one per axis of x, got 2"),
    ("tile", [(2, 3)], {"reps": [1, -1]}, "reps [1, -1]: every rep must be >= 0"),
    ("repeat", [(2, 3)], {"repeats": [1, 2], "axis": 1}, "repeats has 2 counts; axis 1 of x has 3"),
    ("repeat", [(2, 3)], {"repeats": [1, 2]}, "repeats has 2 counts; x's elements (axis=None"),
    ("repeat", [(2, 3)], {"repeats": 2, "axis": 2}, "axis 2 is out of range for rank 2"),
    ("repeat", [(2, 3)], {"repeats": -1}, "repeats must be >= 0, got -1"),
    ("repeat", [(2, 3)], {"repeats": 1.5}, "repeats must be an integer or a list of integers"),
    ("roll", [(2, 3)], {"shift": [1, 2]}, "axis=None rolls x flattened, by an integer shift"),
    ("roll", [(2, 3)], {"shift": 1, "axis": [0, 1]}, "two integers or two lists of one length"),
    ("roll", [(2, 3)], {"shift": [1, 1], "axis": [0, 0]}, "axis [0, 0] names the same axis twice"),
    ("roll", [(2, 3)], {"axis": 0}, "shift must be an integer or a list of integers, got None"),
    ("dilate", [(2, 3)], {"dilation": 1}, "axes must be an integer or a list of integers, got"),
    ("dilate", [(2, 3)], {"axes": [0], "dilation": -1}, "dilation must be an integer >= 0, got -1"),
    ("undilate", [(2, 3)], {"axes": [2], "dilation": 1}, "axis 2 is out of range for rank 2"),
    ("reshape", [(2, 3)], {"shape": [4, 2]}, "cannot reshape (2, 3) (6 elements) into [4, 2]"),
    ("reshape", [(2, 3)], {"shape": [4, -1]}, "cannot reshape (2, 3) into [4, -1]"),
    ("reshape", [(2, 3)], {"shape": [-1, -1]}, "shape [-1, -1] may hold one -1"),
    ("reshape", [(2, 3)], {}, "shape must be a list of integers, got None"),
    ("squeeze", [(1, 3)], {"axis": 1}, "cannot squeeze axis 1 of size 3"),
    ("squeeze", [(1, 3)], {"axis": 2}, "axis 2 is out of range for rank 2"),
    ("sum", [(2, 3)], {"axis": 2}, "axis 2 is out of range for rank 2"),
    ("mean", [(2, 3)], {"axis": [0, -3]}, "axis -3 is out of range for rank 2"),
    ("max", [(2, 3)], {"axis": [0, -2]}, "axis [0, -2] names the same axis twice"),
    ("logsumexp", [(2, 3)], {"axis": 1.5}, "axis must be an integer, got 1.5"),
    ("min", [(2, 3)], {"keepdims": 1}, "keepdims must be true or false, got 1"),
    ("softmax", [()], {}, "axis -1 is out of range for rank 0"),
    ("log_softmax", [(2, 3)], {"axis": 2}, "axis 2 is out of range for rank 2"),
    ("expand_dims", [(2, 3)], {"axis": 3}, "axis 3 is out of range for rank 3"),
    ("expand_dims", [(2, 3)], {"axis": -4}, "axis -4 is out of range for rank 3"),
    ("broadcast_to", [(3,)], {"shape": [2, 4]}, "shapes (3,) and (2, 4) do not broadcast"),
    ("broadcast_to", [(2, 3)], {"shape": [3]}, "cannot broadcast (2, 3) to (3,)"),
    ("concat", [(2, 3), (3, 4)], {}, "shapes (2, 3), (3, 4) differ off axis 0"),
    ("concat", [(2, 3), (2, 3, 1)], {"axis": 1}, "shapes (2, 3), (2, 3, 1) differ off axis 1"),
    ("concat", [(2, 3), (2, 3)], {"axis": 2}, "axis 2 is out of range for rank 2"),
    ("stack", [(2, 3), (3, 2)], {}, "shapes (2, 3), (3, 2) differ"),
    ("stack", [(2, 3), (2, 3)], {"axis": -4}, "axis -4 is out of range for rank 3"),
    ("leaky_relu", [(2,)], {"alpha": "0.2"}, "alpha must be a number, got '0.2'"),
    ("elu", [(2,)], {"alpha": True}, "alpha must be a number, got True"),
    ("gelu", [(2,)], {"approximate": 1}, "approximate must be true or false, got 1"),
    ("norm", [(2, 3)], {"ord": 3}, "ord must be one of 1, 2, 'inf', 'fro', got 3"),
    ("norm", [(2, 3)], {"ord": "fro"}, "ord 'fro' needs two axes (axis=[-2, -1]), got axis=None"),
    ("norm", [(2, 3)], {"ord": 1, "axis": [0, 1]}, "only 'fro' is supported there"),
    ("norm", [(2, 3)], {"axis": 2}, "axis 2 is out of range for rank 2"),
    ("prod", [(2, 3)], {"axis": 3}, "axis 3 is out of range for rank 2"),
    ("cumsum", [(2, 3)], {"axis": 2}, "axis 2 is out of range for rank 2"),
    ("cumsum", [()], {}, "axis 0 is out of range for rank 0"),
    ("cumprod", [(2, 3)], {"exclusive": 1}, "exclusive must be true or false, got 1"),
    ("cumprod", [(2, 3)], {"reverse": "yes"}, "reverse must be true or false, got 'yes'"),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 4, 2)], {}, "x has 3 input channels, w expects 4 (groups=1)"),
    ("conv2d", [(1, 5, 5, 4), (3, 3, 2, 3)], {"groups": 2}, "groups=2 must divide x's 4 input"),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 3, 2)], {"strides": 0}, "strides=0: strides must be an int"),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 3, 2)], {"strides": [1, 2, 1]}, "a list of 2 such ints"),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 3, 2)], {"dilations": 0}, "dilations=0: dilations must"),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 3, 2)], {"groups": 0}, "groups=0: groups must be an int"),
    (
        "conv2d",
        [(1, 5, 5, 3), (3, 3, 3, 2)],
        {"padding": "same"},
        "padding='same': padding must be 'VALID', 'SAME' (upper case)",
    ),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 3, 2)], {"padding": -1}, "padding=-1: padding must be"),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 3, 2)], {"padding": [[1, -1], [0, 0]]}, "[before, after]"),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 3, 2)], {"padding": [1, 1]}, "padding=[1, 1]: padding"),
    (
        "conv2d",
        [(1, 5, 5, 3), (3, 3, 3, 2)],
        {"data_format": "NWC"},
        "data_format='NWC': data_format must be 'NHWC' or 'NCHW'",
    ),
    ("conv2d", [(1, 5, 5, 3), (3, 3, 3, 2)], {"filter_format": "OIW"}, "filter_format must be"),
    ("conv2d", [(5, 5, 3), (3, 3, 3, 2)], {}, "x has shape (5, 5, 3); it needs 4 axes (NHWC)"),
    ("conv2d", [(1, 2, 5, 3), (3, 3, 3, 2)], {}, "spatial axis 0 of x has size 2, 2 padded"),
    ("conv1d", [(1, 5, 3), (3, 3, 2)], {"dilations": 3}, "the kernel's span 7"),
    ("conv2d_transpose", [(1, 3, 3, 2), (3, 3, 2, 2)], {}, "output_shape=None: output_shape"),
    (
        "conv2d_transpose",
        [(1, 3, 3, 2), (3, 3, 2, 2)],
        {"output_shape": [1, 8, 8, 2], "strides": 2},
        "needs x of shape (1, 4, 4, 2)",
    ),
    ("tensordot", [(2, 3), (3, 4)], {}, "axes is required: an integer or a pair"),
    ("tensordot", [(2, 3), (3, 4)], {"axes": 3}, "axes=3 contracts that many axes of each side"),
    ("tensordot", [(2, 3), (3, 4)], {"axes": [[0], [0]]}, "axis 0 of a has size 2, axis 0 of b 3"),
    ("tensordot", [(2, 3), (3, 4)], {"axes": [[1, 0], [0]]}, "pairs 2 axes of a with 1 of b"),
    ("tensordot", [(2, 3), (3, 4)], {"axes": [[2], [0]]}, "axes of a: axis 2 is out of range"),
    ("tensordot", [(2, 3), (3, 4)], {"axes": "1"}, "axes must be an integer or a pair"),
    ("einsum", [(2, 3)], {}, "equation must be a string such as 'ij,jk->ik', got None"),
    ("einsum", [(2, 3)], {"equation": "ij,jk->ik"}, "has subscripts for 2 operand(s), got 1"),
    ("einsum", [(2, 3)], {"equation": "ijk->i"}, "operand 1 has shape (2, 3) (rank 2)"),
    ("einsum", [(2, 3), (4, 5)], {"equation": "ij,jk->ik"}, "index 'j' has size 3 in operand 1"),
    ("einsum", [(2, 3)], {"equation": "ii->i"}, "index 'i' has size 2 in operand 1 and 3"),
    ("einsum", [(2, 3)], {"equation": "ij->k"}, "output index 'k' is in no operand"),
    ("einsum", [(2, 3)], {"equation": "ij->ii"}, "the output repeats index 'i'"),
    ("einsum", [(2, 3)], {"equation": "i1->i"}, "an index is one letter a-z or A-Z, got '1'"),
    ("einsum", [(2, 3)], {"equation": "...j->j"}, "'...' is not supported; name every axis"),
    ("einsum", [(2, 3)], {"equation": "ij->i->j"}, "has more than one '->'"),
    ("inv", [(2, 3)], {}, "x has shape (2, 3); it needs square matrices in its last two axes"),
    ("det", [(3,)], {}, "x has shape (3,); it needs square matrices"),
    ("slogdet", [(2, 3)], {}, "x has shape (2, 3); it needs square matrices"),
    ("split", [(4, 3)], {"num_or_sizes": 3}, "a count of pieces must be >= 1 and divide axis 0"),
    ("split", [(4, 3)], {"num_or_sizes": 0}, "a count of pieces must be >= 1"),
    ("split", [(4, 3)], {"num_or_sizes": [1, -1, -1]}, "sizes are >= 0, with at most one -1"),
    ("split", [(4, 3)], {"num_or_sizes": [5, -1]}, "the sizes add up to 5, not to axis 0's size 4"),
    ("split", [(4, 3)], {"num_or_sizes": 2, "axis": 2}, "axis 2"),
    ("split", [()], {"num_or_sizes": 1}, "needs rank >= 1, got a scalar"),
    ("unstack", [()], {}, "needs rank >= 1, got a scalar"),
    ("unstack", [(2, 3)], {"axis": -3}, "axis -3"),
    ("cholesky", [(2, 3, 4)], {}, "x has shape (2, 3, 4); it needs square matrices"),
    ("solve", [(3, 4), (3, 1)], {}, "a has shape (3, 4); it needs square matrices"),
    ("solve", [(3, 3), (3,)], {}, "b has shape (3,); it needs matrices [..., 3, k]"),
    ("solve", [(3, 3), (2, 1)], {}, "b has 2 rows, a is 3x3"),
    ("solve", [(2, 3, 3), (3, 1)], {}, "batch axes (2,) and () differ (tf.linalg.solve"),
    ("triangular_solve", [(3, 3), (2, 1)], {}, "b has shape (2, 1); it needs matrices [..., 3"),
    ("triangular_solve", [(2, 3, 3), (4, 3, 1)], {}, "batch axes: shapes (2,) and (4,) do not"),
    ("triangular_solve", [(3, 3), (3, 1)], {"lower": 1}, "lower must be True or False, got 1"),
    ("getitem", [(3, 4)], {"index": (5,)}, "index [5] does not apply to shape (3, 4)"),
    ("getitem", [(3, 4)], {"index": (0, 0, 0)}, "index [0, 0, 0] does not apply to shape (3, 4)"),
    ("getitem", [(3, 4)], {"index": (Ellipsis, Ellipsis)}, "index [..., ...] does not apply"),
    ("getitem", [(3, 4)], {"index": (slice(None, None, 0),)}, "index [::0] does not apply"),
]


@pytest.mark.parametrize(
    ("name", "shapes", "attrs", "message"),
    [
        pytest.param(*row, id=f"{row[0]}-{','.join(_fmt_shape(s) for s in row[1])}-{row[3]}")
        for row in SHAPE_ERRORS
    ],
)
def test_shape_rule_errors(
    name: str, shapes: list[Shape], attrs: dict[str, Any], message: str
) -> None:
    op = get_op(name)
    with pytest.raises(ShapeError, match=re.escape(message)):
        op_shape(op, shapes, op.resolve_attrs(attrs))


# The shape rules of broadcasting and of basic indexing are worked out without NumPy
# (checking a case's shapes imports none); NumPy is their oracle, on every combination
# of these items up to three long, including the ones NumPy refuses. (A bool is NumPy's
# mask, not basic indexing: refused, below.)
INDEX_ITEMS = [
    None, Ellipsis, 0, 1, -1, 2, -3, 5, 1.0, slice(None), slice(1, None),
    slice(None, None, -1), slice(-2, 1, -1), slice(0, 10, 3), slice(5, 1), slice(None, None, 0),
]  # fmt: skip
ORACLE_SHAPES = [(), (3,), (3, 4), (2, 1, 5), (0, 3)]


def _numpy_or_refused(compute: Callable[[], Any]) -> Any:
    try:
        return compute()
    except (IndexError, ValueError, TypeError):
        return "refused"


@pytest.mark.parametrize("shape", ORACLE_SHAPES, ids=_fmt_shape)
def test_getitem_shape_is_numpy_s(shape: Shape) -> None:
    getitem = get_op("getitem")
    for k in range(4):
        for index in itertools.product(INDEX_ITEMS, repeat=k):
            want = _numpy_or_refused(lambda: np.empty(shape)[index].shape)  # noqa: B023
            try:
                got = getitem.shape(shape, index=index)
            except ShapeError:
                got = "refused"
            assert got == want, f"x{list(shape)}[{index}]"
    if shape:
        with pytest.raises(ShapeError, match=re.escape("only integers, slices, None and ...")):
            getitem.shape(shape, index=(True,))


def test_broadcast_shapes_are_numpy_s() -> None:
    sizes = [(), (1,), (3,), (2, 1), (1, 3), (2, 3), (4, 1, 1), (0,), (0, 1), (2, 0)]
    for shapes in itertools.product(sizes, repeat=2):
        want = _numpy_or_refused(lambda: np.broadcast_shapes(*shapes))  # noqa: B023
        try:
            got = broadcast_shapes(*shapes)
        except ShapeError:
            got = "refused"
        assert got == want, shapes
    assert broadcast_shapes((2, 1), (1, 3), (4, 1, 1)) == np.broadcast_shapes(
        (2, 1), (1, 3), (4, 1, 1)
    )


@pytest.mark.parametrize(
    ("name", "given", "message"),
    [
        ("sum", {"axes": 1}, "unknown attribute 'axes' (allowed: axis, keepdims)"),
        ("relu", {"axis": 0}, "unknown attribute 'axis' (allowed: none)"),
        ("transpose", {"perm": None, "shape": [2]}, "unknown attribute 'shape' (allowed: perm)"),
    ],
)
def test_unknown_attributes_are_rejected(name: str, given: dict[str, Any], message: str) -> None:
    with pytest.raises(ShapeError, match=re.escape(message)):
        get_op(name).resolve_attrs(given)


def test_resolve_attrs_fills_defaults() -> None:
    assert get_op("sum").resolve_attrs({"axis": 1}) == {"axis": 1, "keepdims": False}
    assert get_op("softmax").resolve_attrs({}) == {"axis": -1}


# --- comparisons in expressions ---------------------------------------------------------


def test_python_comparisons_are_the_comparison_ops() -> None:
    from gradcheck.expression import parse

    for symbol, name in [(">", "greater"), (">=", "greater_equal"), ("<", "less"),
                         ("<=", "less_equal"), ("==", "equal"), ("!=", "not_equal")]:  # fmt: skip
        expression = parse(f"where(x {symbol} 0.5, x, y)", {"x": (3,), "y": ()})
        cond = expression.output.args[0]
        assert (cond.op.name, cond.shape) == (name, (3,)), symbol


# --- products at zeros (SPEC §3.1) ------------------------------------------------------

ZEROS = np.array([[2.0, 0.0, 3.0, -1.5], [0.0, 1.5, 0.0, 2.0], [0.5, -2.0, 1.5, 3.0]])


@pytest.mark.parametrize("axis", [1, 0, None])
def test_prod_at_zeros_is_tensorflows_exact_rule(axis: Any) -> None:
    """One zero in a group: it gets the others' product; two zeros: every element gets 0."""
    op = get_op("prod")
    attrs = op.resolve_attrs({"axis": axis})
    ans = op_forward(op, [ZEROS], attrs)
    cot = np.arange(1.0, ans.size + 1).reshape(ans.shape)
    got = op_vjp(op, 0, cot, ans, [ZEROS], attrs)
    _, (want,) = tf_value_and_grads(op, [ZEROS], attrs, cot)
    np.testing.assert_allclose(got, want, **TF_TOL)
    np.testing.assert_allclose(got, fd_vjp(op, 0, cot, [ZEROS], attrs), **FD_TOL)
    if axis == 1:
        assert got[0].tolist() == [0.0, -9.0, 0.0, 0.0] and not got[1].any()


@pytest.mark.parametrize(
    "attrs",
    [{"axis": 1}, {"axis": 1, "exclusive": True}, {"axis": 1, "reverse": True},
     {"axis": 0, "exclusive": True, "reverse": True}],
)  # fmt: skip
def test_cumprod_at_zeros_is_exact_where_tensorflows_is_not(attrs: dict[str, Any]) -> None:
    """The registry's cumprod VJP and JVP agree with finite differences at zeros (one and
    two per row); TensorFlow's gradient divides by x and is NaN there, which is why
    cases with zeros in cumprod's input are for the numeric reference."""
    op = get_op("cumprod")
    attrs = op.resolve_attrs(attrs)
    ans = op_forward(op, [ZEROS], attrs)
    cot = np.random.default_rng(0).standard_normal(ans.shape)
    got = op_vjp(op, 0, cot, ans, [ZEROS], attrs)
    np.testing.assert_allclose(got, fd_vjp(op, 0, cot, [ZEROS], attrs), **FD_TOL)
    _, (tf_grad,) = tf_value_and_grads(op, [ZEROS], attrs, cot)
    assert not np.allclose(tf_grad, got, equal_nan=False)
    t = np.random.default_rng(1).standard_normal(ZEROS.shape)
    jvp = np.broadcast_to(op.jvps[0](t, ans, ZEROS, **attrs), ans.shape)
    fd = op_forward(op, [ZEROS + FD_STEP * t], attrs) - op_forward(op, [ZEROS - FD_STEP * t], attrs)
    np.testing.assert_allclose(jvp, fd / (2 * FD_STEP), **FD_TOL)


def test_a_case_where_tensorflows_cumprod_gradient_is_wrong_is_judged_numerically() -> None:
    """cumprod declares where TensorFlow's gradient is wrong (Op.tf_wrong): the shipped
    case with zeros is judged by finite differences and says why; the one without zeros
    stays TensorFlow's."""
    from pathlib import Path

    from gradcheck.cases import load_file
    from gradcheck.engines.builtin.engine import BuiltinEngine
    from gradcheck.runner import RunOptions, run

    path = Path(__file__).resolve().parents[1] / "cases" / "products.yaml"
    cases = [c for c in load_file(path) if c.name.startswith("cumprod")]
    results = {r.name: r for r in run(cases, BuiltinEngine, RunOptions()).cases}
    at_zeros, away = results["cumprod_at_zeros"], results["cumprod_away_from_zeros"]
    assert at_zeros.passed and at_zeros.reference == "numeric"
    assert "TensorFlow's cumprod gradient divides by x, and x holds zeros" in at_zeros.message
    assert away.passed and away.reference == "tensorflow" and "numeric" not in away.message
