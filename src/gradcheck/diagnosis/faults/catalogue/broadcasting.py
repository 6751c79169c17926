"""matmul's and the shared unbroadcast step's faults: the seed's bug class."""

from __future__ import annotations

import numpy as np

from ..rules import Fault, leading_kept, leading_only, no_reduce

BINARY_ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "pow", "maximum", "minimum"})
# The ops whose VJPs give the broadcast shape for the shared unbroadcast to sum back.
BROADCASTING = BINARY_ELEMENTWISE | {"broadcast_to"}
UNBROADCAST = "`g.sum(axis=tuple(range(g.ndim - a.ndim)))`, then `.sum(axis=ones, keepdims=True)`"

# fmt: off
FAULTS: tuple[Fault, ...] = (
    Fault(
        "matmul.full-transpose",
        "matmul's VJP transposes the other operand with a full transpose (tf.transpose "
        "without perm reverses every axis) where a batched matmul must swap only the last two",
        "swap only the last two axes: `tf.linalg.matrix_transpose(b)`, or "
        "`tf.matmul(g, b, transpose_b=True)`",
        vjps={
            ("matmul", 0): lambda g, ans, a, b: g @ np.transpose(b),
            ("matmul", 1): lambda g, ans, a, b: np.transpose(a) @ g,
        },
        seen="the question gradcheck grew from (cases/seed.yaml, examples/seed_engine.py)",
    ),
    Fault(
        "matmul.no-batch-reduce",
        "matmul's gradient for an operand whose batch axes were broadcast is not summed "
        "back over those axes",
        f"sum the gradient over the broadcast batch axes: {UNBROADCAST}",
        reduce=no_reduce,
        reduce_ops=frozenset({"matmul"}),
        seen="flashlight/flashlight#760",
    ),
    Fault(
        "matmul.untransposed",
        "matmul's VJP multiplies by the other operand as it is, g @ b and a @ g, without "
        "transposing it",
        "transpose the other operand's last two axes: `g @ np.swapaxes(b, -1, -2)` and "
        "`np.swapaxes(a, -1, -2) @ g`",
        vjps={
            ("matmul", 0): lambda g, ans, a, b: g @ b,
            ("matmul", 1): lambda g, ans, a, b: a @ g,
        },
        seen="tile-ai/TileOPs#54",
    ),
    Fault(
        "broadcast.no-reduce",
        "gradients of broadcasting ops are not summed back to the argument's shape",
        f"unbroadcast: sum over the extra leading axes and, keeping them, over the axes "
        f"where the argument had size 1: {UNBROADCAST}",
        reduce=no_reduce,
        reduce_ops=BROADCASTING,
        seen="deeplearning4j/nd4j#2424",
        at_op="{op}'s VJP does not sum its broadcast {axes} back",
    ),
    Fault(
        "broadcast.leading-only",
        "unbroadcast sums over the extra leading axes but not over the axes where the "
        "argument had size 1",
        "also sum over every axis where the argument had size 1: "
        "`g.sum(axis=ones, keepdims=True)`",
        reduce=leading_only,
        reduce_ops=BROADCASTING | {"matmul"},
        seen="the question gradcheck grew from (cases/seed.yaml, examples/seed_engine.py)",
        at_op="{op}'s VJP does not sum its size-1 {axes}",
    ),
    Fault(
        "broadcast.leading-kept",
        "unbroadcast sums over the broadcast axes with keepdims=True everywhere, so the "
        "extra leading axes stay, as size 1, in the gradient's shape",
        "sum the extra leading axes without keepdims: "
        "`g.sum(axis=tuple(range(g.ndim - a.ndim)))`, keepdims only for size-1 axes",
        reduce=leading_kept,
        reduce_ops=BROADCASTING | {"matmul"},
        seen="deeplearning4j/nd4j#2424",
        at_op="{op}'s VJP keeps its extra leading {axes} as size 1",
    ),
)
# fmt: on
