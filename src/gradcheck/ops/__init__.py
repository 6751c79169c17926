"""The op registry. Importing this package declares every op (SPEC §3)."""

# SPEC §3's ops, then §3.1's: `gradcheck ops` and the adapter template list them so.
# isort: off
from . import elementwise, linalg, nn, reductions, shape  # noqa: F401  (declarations)
from . import unary, cumulative, statistics, comparisons, gathers  # noqa: F401
from . import layout  # noqa: F401
from . import contractions, solvers  # noqa: F401
from . import splits  # noqa: F401  (split, unstack; slogdet is in solvers)
from . import conv  # noqa: F401  (conv1d, conv2d, conv2d_transpose)
from . import pooling, normalization  # noqa: F401

# isort: on
from .broadcast import broadcast_shapes, unbroadcast
from .registry import Interval, Op, Shape, ShapeError, all_ops, get_op, has_op, operator_ops

__all__ = [
    "Interval",
    "Op",
    "Shape",
    "ShapeError",
    "all_ops",
    "broadcast_shapes",
    "get_op",
    "has_op",
    "operator_ops",
    "unbroadcast",
]
