"""Broadcasting and axis helpers shared by the shape rules and the VJPs."""

from __future__ import annotations

from collections.abc import Sequence

from ..util.lazy_numpy import np
from .registry import Shape, ShapeError


def fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy/TensorFlow broadcasting, with an error that names both shapes. Written out
    rather than asked of NumPy: checking a case's shapes imports no NumPy (`lazy_numpy`)."""
    rank = max(map(len, shapes), default=0)
    out = []
    for sizes in zip(*((1,) * (rank - len(s)) + tuple(s) for s in shapes), strict=True):
        stretched = {n for n in sizes if n != 1}
        if len(stretched) > 1:
            listed = " and ".join(fmt_shape(s) for s in shapes)
            raise ShapeError(f"shapes {listed} do not broadcast")
        out.append(stretched.pop() if stretched else 1)
    return tuple(out)


def sums_back(source: Shape, target: Shape) -> bool:
    """Could an array of shape `target` broadcast to `source`, so that `unbroadcast`
    sums a gradient of shape `source` back to it?"""
    extra = len(source) - len(target)
    return extra >= 0 and all(t in (1, s) for t, s in zip(target, source[extra:], strict=True))


def unbroadcast(g: np.ndarray, shape: Shape) -> np.ndarray:
    """Sum a gradient in a broadcast shape back to an argument's `shape`.

    Both halves matter: the extra leading axes are summed away, and so are the
    axes where the argument had size 1 (keeping them, as size 1).
    """
    g = g if hasattr(g, "shape") else np.asarray(g)  # the builtin engine's tensors stay such
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    ones = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)
    if ones:
        g = g.sum(axis=ones, keepdims=True)
    return g


def normalize_axis(axis: object, ndim: int, *, what: str = "axis") -> int:
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ShapeError(f"{what} must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{what} {axis} is out of range for rank {ndim}")
    return axis % ndim


def normalize_axes(axis: object, ndim: int) -> tuple[int, ...]:
    """`axis=None|int|list` as a sorted tuple of non-negative axes (None: all of them)."""
    if axis is None:
        return tuple(range(ndim))
    items = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    axes = tuple(sorted(normalize_axis(a, ndim) for a in items))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"axis {axis!r} names the same axis twice")
    return axes


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def expand_reduced(g: np.ndarray, shape: Shape, axis: object, keepdims: bool) -> np.ndarray:
    """Undo a reduction's lost axes so that `g` broadcasts against the input."""
    if keepdims:
        return g
    return np.expand_dims(g, normalize_axes(axis, len(shape)))
