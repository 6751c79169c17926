"""The op registry. Importing this package declares every op (SPEC §3)."""

from . import comparisons, elementwise, gathers, linalg, nn, reductions, shape  # noqa: F401
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
