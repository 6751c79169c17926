"""A convolution's attributes read into one geometry, checked, for ops/conv.py.

`geometry` turns conv1d's/conv2d's attributes (and conv2d_transpose's, through its
output) into a `Geometry`: the transposes between the data and filter formats and the
im2col layout (channels last, filter ``(*kernel, in, out)``), the strides, explicit pads
(TensorFlow's SAME: ceil(size / stride) outputs, an odd total pad's extra element after),
dilations and groups. Every bad attribute is a `ShapeError` naming it and what it may be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..util.lazy_numpy import np
from .broadcast import fmt_shape
from .im2col import out_size
from .registry import ShapeError

_DATA = {"NWC": None, "NCW": (0, 2, 1), "NHWC": None, "NCHW": (0, 2, 3, 1)}
_DATA_BACK = {"NCW": (0, 2, 1), "NCHW": (0, 3, 1, 2)}
_FILTER = {"WIO": None, "OIW": (2, 1, 0), "HWIO": None, "OIHW": (2, 3, 1, 0)}
_FILTER_BACK = {"OIW": (2, 1, 0), "OIHW": (3, 2, 0, 1)}
FORMATS = {1: (("NWC", "NCW"), ("WIO", "OIW")), 2: (("NHWC", "NCHW"), ("HWIO", "OIHW"))}


def is_int(v: Any) -> bool:
    whole = isinstance(v, float) and v.is_integer()
    return (isinstance(v, int) and not isinstance(v, bool)) or whole


def _per_axis(name: str, value: Any, rank: int, low: int = 1) -> tuple[int, ...]:
    """An int or a list of `rank` ints, each at least `low`."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if len(items) == 1:
        items = list(items) * rank
    if len(items) != rank or not all(is_int(v) and v >= low for v in items):
        raise ShapeError(
            f"{name}={value!r}: {name} must be an int >= {low} or a list of {rank} such ints"
        )
    return tuple(int(v) for v in items)


def _pads(padding: Any, sizes, kernel, strides, dilations) -> tuple[tuple[int, int], ...]:
    """`padding` as one (before, after) pair per spatial axis."""
    rank = len(sizes)
    if padding == "VALID":
        return ((0, 0),) * rank
    if padding == "SAME":
        pads = []
        for n, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
            total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
            pads.append((total // 2, total - total // 2))  # the odd one after, as TensorFlow
        return tuple(pads)
    allowed = (
        f"padding must be 'VALID', 'SAME' (upper case), an int >= 0 or a list of {rank} "
        "[before, after] pairs of ints >= 0"
    )
    if is_int(padding) and padding >= 0:
        return ((int(padding), int(padding)),) * rank
    pairs = padding if isinstance(padding, (list, tuple)) else None
    if (
        pairs is None
        or len(pairs) != rank
        or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs)
        or not all(is_int(v) and v >= 0 for p in pairs for v in p)
    ):
        raise ShapeError(f"padding={padding!r}: {allowed}")
    return tuple((int(a), int(b)) for a, b in pairs)


@dataclass(frozen=True)
class Geometry:
    """One convolution in the im2col layout (see the module docstring)."""

    x_perm: tuple[int, ...] | None
    x_back: tuple[int, ...] | None
    w_perm: tuple[int, ...] | None
    w_back: tuple[int, ...] | None
    strides: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    dilations: tuple[int, ...]
    groups: int

    @property
    def attrs(self) -> dict[str, Any]:
        return {"strides": self.strides, "pads": self.pads, "dilations": self.dilations,
                "groups": self.groups}  # fmt: skip


def _layout(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ShapeError(f"{name}={value!r}: {name} must be {' or '.join(map(repr, allowed))}")


def moved(shape, perm) -> tuple[int, ...]:
    return tuple(shape) if perm is None else tuple(shape[p] for p in perm)


def geometry(
    rank: int, x: tuple, w: tuple, strides: Any, padding: Any, dilations: Any, groups: Any,
    data_format: str, filter_format: str, channels: str = "x",
) -> Geometry:  # fmt: skip
    """The checked geometry of a convolution of `x` by `w` (shapes in their formats);
    `channels` names what feeds the filter's input channels (conv2d_transpose: its output)."""
    data, filters = FORMATS[rank]
    _layout("data_format", data_format, data)
    _layout("filter_format", filter_format, filters)
    for what, shape in ((channels, x), ("w", w)):
        if len(shape) != rank + 2:
            raise ShapeError(
                f"{what} has shape {fmt_shape(shape)}; it needs {rank + 2} axes "
                f"({data_format if what != 'w' else filter_format})"
            )
    xc, wc = moved(x, _DATA[data_format]), moved(w, _FILTER[filter_format])
    stride = _per_axis("strides", strides, rank)
    dilation = _per_axis("dilations", dilations, rank)
    if not (is_int(groups) and groups >= 1):
        raise ShapeError(f"groups={groups!r}: groups must be an int >= 1")
    groups = int(groups)
    c, cin, o = xc[-1], wc[-2], wc[-1]
    if c % groups or o % groups:
        raise ShapeError(
            f"groups={groups} must divide {channels}'s {c} input channels and w's {o} output "
            "channels"
        )
    if c != cin * groups:
        raise ShapeError(
            f"{channels} has {c} input channels, w expects {cin * groups} (groups={groups})"
        )
    pads = _pads(padding, xc[1:-1], wc[:rank], stride, dilation)
    for a in range(rank):
        span = (wc[a] - 1) * dilation[a] + 1
        if xc[1 + a] + sum(pads[a]) < span:
            raise ShapeError(
                f"spatial axis {a} of {channels} has size {xc[1 + a]}, {xc[1 + a] + sum(pads[a])}"
                f" padded: smaller than the kernel's span {span} (size {wc[a]}, dilation "
                f"{dilation[a]}) with padding={padding!r}"
            )
    return Geometry(
        _DATA[data_format], _DATA_BACK.get(data_format), _FILTER[filter_format],
        _FILTER_BACK.get(filter_format), stride, pads, dilation, groups,
    )  # fmt: skip


def out_shape(geo: Geometry, x: tuple, w: tuple) -> tuple[int, ...]:
    xc, wc = moved(x, geo.x_perm), moved(w, geo.w_perm)
    rank = len(xc) - 2
    spatial = [
        out_size(xc[1 + a], wc[a], geo.strides[a], geo.dilations[a], geo.pads[a])
        for a in range(rank)
    ]
    out = (xc[0], *spatial, wc[-1])
    return moved(out, geo.x_back)


def relaid(a, perm):
    return a if perm is None else np.transpose(a, perm)
