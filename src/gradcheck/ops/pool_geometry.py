"""A pool's attributes read into its windows, checked, for ops/pooling.py.

`geometry` turns a pool's ``ksize``, ``strides``, ``padding`` and ``data_format`` into a
`Geometry`: the spatial axes, the window and step sizes, TensorFlow's pads (``'SAME'``:
``ceil(n / stride)`` outputs, the odd pad after) and the output sizes, every bad attribute a
`ShapeError` naming it and what it may be. `windows` is x's windows as a strided view
(``sliding_window_view``), and `pad_width`, `strided` and `unpadded` the paddings and
indices that view is made of (the pools' rule texts name them too).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..util.lazy_numpy import np
from .broadcast import fmt_shape
from .registry import Shape, ShapeError

FORMATS = {2: ("NHWC", "NCHW"), 1: ("NWC", "NCW")}
_LETTERS = {2: "HW", 1: "W"}


class Geometry(NamedTuple):
    """Where the windows are: spatial axes, window and step sizes, padding, output sizes."""

    spatial: tuple[int, ...]
    ksize: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]  # (before, after) per spatial axis
    out: tuple[int, ...]


def _sizes(value: Any, name: str, rank: int) -> tuple[int, ...]:
    items = list(value) if isinstance(value, (list, tuple)) else [value] * rank
    if len(items) != rank or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in items
    ):
        allowed = "a positive integer" + (f" or a list of {rank}" if rank > 1 else "")
        raise ShapeError(f"{name} must be {allowed}, got {value!r}")
    return tuple(items)


def geometry(
    shape: Shape, ksize: Any, strides: Any, padding: Any, data_format: Any, rank: int
) -> Geometry:
    """The windows of a rank-`rank` pool over an input of `shape`; `ShapeError` naming the
    attribute and its allowed values when one is wrong."""
    formats = FORMATS[rank]
    if data_format not in formats:
        allowed = " or ".join(map(repr, formats))
        raise ShapeError(f"data_format must be {allowed}, got {data_format!r}")
    if padding not in ("VALID", "SAME"):
        raise ShapeError(f"padding must be 'VALID' or 'SAME', got {padding!r}")
    k = _sizes(ksize, "ksize", rank)
    s = k if strides is None else _sizes(strides, "strides", rank)
    if len(shape) != rank + 2:
        layout = ", ".join(data_format)
        raise ShapeError(
            f"x has shape {fmt_shape(shape)}; it needs rank {rank + 2} "
            f"({layout} for data_format={data_format!r})"
        )
    first = 1 if data_format.endswith("C") else 2
    spatial = tuple(range(first, first + rank))
    pads, out = [], []
    for letter, axis, kk, ss in zip(_LETTERS[rank], spatial, k, s, strict=True):
        n = shape[axis]
        if padding == "VALID":
            if kk > n:
                raise ShapeError(
                    f"ksize {kk} is larger than axis {letter} of size {n} (padding='VALID'): "
                    f"ksize along {letter} must be at most {n}, or padding='SAME'"
                )
            pads.append((0, 0))
            out.append((n - kk) // ss + 1)
        else:
            o = -(-n // ss)
            total = max((o - 1) * ss + kk - n, 0)
            pads.append((total // 2, total - total // 2))
            out.append(o)
    return Geometry(spatial, k, s, tuple(pads), tuple(out))


def pad_width(ndim: int, geo: Geometry) -> list[tuple[int, int]]:
    """np.pad's padding of x: the geometry's pads on the spatial axes, none elsewhere."""
    width = [(0, 0)] * ndim
    for axis, pad in zip(geo.spatial, geo.pads, strict=True):
        width[axis] = pad
    return width


def strided(ndim: int, geo: Geometry) -> tuple:
    """The index that keeps every stride-th window of `sliding_window_view`'s."""
    index = [slice(None)] * ndim
    for axis, s, o in zip(geo.spatial, geo.strides, geo.out, strict=True):
        index[axis] = slice(None, s * (o - 1) + 1, s)
    return tuple(index)


def unpadded(ndim: int, geo: Geometry, shape: Shape) -> tuple:
    """The index of x's place in its padded array."""
    index = [slice(None)] * ndim
    for axis, (before, _) in zip(geo.spatial, geo.pads, strict=True):
        index[axis] = slice(before, before + shape[axis])
    return tuple(index)


def windows(x, geo: Geometry, fill: float, writeable: bool = False):
    """x's windows, padded with `fill`: x's shape with the output's spatial sizes, then
    the window's axes last. A view when nothing is padded."""
    width = pad_width(x.ndim, geo)
    padded = np.pad(x, width, constant_values=fill) if any(map(any, width)) else x
    view = np.lib.stride_tricks.sliding_window_view(
        padded, geo.ksize, axis=geo.spatial, writeable=writeable
    )
    return view[strided(x.ndim, geo)]


def window_axes(rank: int) -> tuple[int, ...]:
    """The axes of each window in `windows`' view: the last `rank`."""
    return tuple(range(-rank, 0))
