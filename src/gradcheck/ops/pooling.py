"""Pooling (SPEC §3.1): max_pool2d, avg_pool2d, max_pool1d, avg_pool1d, TensorFlow's.

A pool reads windows of ``ksize`` elements every ``strides`` along the spatial axes (H, W or
W; the channels last, NHWC/NWC, or first, NCHW/NCW), with no padding (``'VALID'``) or
TensorFlow's ``'SAME'`` (``ceil(n / stride)`` outputs, the padding split with the odd one
after). The windows are a strided view (``sliding_window_view``), never a Python loop over
output pixels. ``avg`` averages over the in-bounds elements only, as TensorFlow does; ``max``
gives a tie's whole gradient to the first maximum of the window in row-major order, as
TensorFlow does (convention ``first``; ``split`` shares it, ops/conventions.py).

The VJP scatters each window's gradient back, *adding* where windows overlap (strides <
ksize): `POOL_SCATTER`, an op of its own so the VJP stays differentiable on the builtin
engine's tensors; its adjoint is `POOL_GATHER`, which reads each window's share (for
``max`` the value at the window's maximum: max-pool's JVP), and the other way round. Both
take ``x`` to place the maxima; their derivative in ``x`` is zero (the place is piecewise
constant).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..util.lazy_numpy import np
from .broadcast import fmt_shape
from .registry import Op, Shape, ShapeError, get_op, register

_FORMATS = {2: ("NHWC", "NCHW"), 1: ("NWC", "NCW")}
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
    formats = _FORMATS[rank]
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


def _shape(rank: int):
    def shape(x: Shape, ksize=None, strides=None, padding="VALID", data_format=None) -> Shape:
        geo = geometry(x, ksize, strides, padding, data_format, rank)
        out = list(x)
        for axis, o in zip(geo.spatial, geo.out, strict=True):
            out[axis] = o
        return tuple(out)

    return shape


def _pad_width(ndim: int, geo: Geometry) -> list[tuple[int, int]]:
    width = [(0, 0)] * ndim
    for axis, pad in zip(geo.spatial, geo.pads, strict=True):
        width[axis] = pad
    return width


def _strided(ndim: int, geo: Geometry) -> tuple:
    """The index that keeps every stride-th window of `sliding_window_view`'s."""
    index = [slice(None)] * ndim
    for axis, s, o in zip(geo.spatial, geo.strides, geo.out, strict=True):
        index[axis] = slice(None, s * (o - 1) + 1, s)
    return tuple(index)


def _unpadded(ndim: int, geo: Geometry, shape: Shape) -> tuple:
    index = [slice(None)] * ndim
    for axis, (before, _) in zip(geo.spatial, geo.pads, strict=True):
        index[axis] = slice(before, before + shape[axis])
    return tuple(index)


def windows(x, geo: Geometry, fill: float, writeable: bool = False):
    """x's windows, padded with `fill`: x's shape with the output's spatial sizes, then
    the window's axes last. A view when nothing is padded."""
    width = _pad_width(x.ndim, geo)
    padded = np.pad(x, width, constant_values=fill) if any(map(any, width)) else x
    view = np.lib.stride_tricks.sliding_window_view(
        padded, geo.ksize, axis=geo.spatial, writeable=writeable
    )
    return view[_strided(x.ndim, geo)]


def _window_axes(rank: int) -> tuple[int, ...]:
    return tuple(range(-rank, 0))


def _counts(shape: Shape, geo: Geometry, dtype):
    """How many in-bounds elements each window holds (SAME pads), broadcast on the output."""
    total = np.ones((), dtype)
    ndim = len(shape)
    for axis, k, s, (before, _), o in zip(
        geo.spatial, geo.ksize, geo.strides, geo.pads, geo.out, strict=True
    ):
        start = np.arange(o) * s - before
        inside = np.minimum(start + k, shape[axis]) - np.maximum(start, 0)
        total = total * inside.astype(dtype).reshape([-1 if a == axis else 1 for a in range(ndim)])
    return total


def _max_weights(x, geo: Geometry, ties: str):
    """1 at each window's first maximum (`ties` 'split': 1/count at every maximum)."""
    rank = len(geo.spatial)
    w = windows(x, geo, -np.inf)
    winners = w == np.max(w, axis=_window_axes(rank), keepdims=True)
    if ties == "split":
        return winners / np.sum(winners, axis=_window_axes(rank), keepdims=True)
    flat = winners.reshape(*winners.shape[:-rank], -1)
    first = flat & (np.cumsum(flat, axis=-1) == 1)
    return first.reshape(winners.shape).astype(x.dtype)


def _weights(x, mode: str, geo: Geometry):
    """Each window element's share of the window's output: max's mask or avg's 1/count."""
    if mode == "avg":
        rank = len(geo.spatial)
        inside = windows(np.ones(x.shape, x.dtype), geo, 0.0)
        count = np.sum(inside, axis=_window_axes(rank), keepdims=True)
        return inside / count
    return _max_weights(x, geo, "split" if mode == "max-split" else "first")


def _scatter(g, x, mode, ksize, strides, padding, data_format, rank):
    """Each window's share of g added back where the window sits (overlaps accumulate)."""
    geo = geometry(x.shape, ksize, strides, padding, data_format, rank)
    shares = np.expand_dims(g, _window_axes(rank)) * _weights(x, mode, geo)
    padded = np.zeros(
        [n + sum(p) for n, p in zip(x.shape, _pad_width(x.ndim, geo), strict=True)], shares.dtype
    )
    view = np.lib.stride_tricks.sliding_window_view(
        padded, geo.ksize, axis=geo.spatial, writeable=True
    )[_strided(x.ndim, geo)]
    for offset in np.ndindex(*geo.ksize):  # one strided add per window element, not per pixel
        at = (Ellipsis, *offset)
        view[at] += shares[at]
    return padded[_unpadded(x.ndim, geo, x.shape)]


def _gather(t, x, mode, ksize, strides, padding, data_format, rank):
    """Each window's share of t summed: t at max's maxima, avg's average of t."""
    geo = geometry(x.shape, ksize, strides, padding, data_format, rank)
    shares = windows(t, geo, 0.0) * _weights(x, mode, geo)
    return np.sum(shares, axis=_window_axes(rank))


def _zeros_like_x(g, ans, t, x, **attrs):
    return np.zeros_like(x)


def _zeros_like_out(t, ans, g, x, **attrs):
    return np.zeros_like(ans)


_POOL_ATTRS = {"mode": "max", "ksize": 1, "strides": None, "padding": "VALID",
               "data_format": "NHWC", "rank": 2}  # fmt: skip
# The pools' adjoint pair, ops so that the rules stay differentiable (see above). Not
# registered: the rules call them.
POOL_SCATTER = Op(
    name="pool_scatter", params=("g", "x"), attrs=_POOL_ATTRS,
    shape=lambda g, x, **attrs: tuple(x), forward=_scatter,
    vjps=(lambda w, ans, g, x, **attrs: POOL_GATHER(w, x, **attrs), _zeros_like_x),
    jvps=(lambda t, ans, g, x, **attrs: POOL_SCATTER(t, x, **attrs), _zeros_like_out),
    doc="each window's share of g added back where the window sits",
)  # fmt: skip
POOL_GATHER = Op(
    name="pool_gather", params=("t", "x"), attrs=_POOL_ATTRS,
    shape=lambda t, x, **attrs: tuple(t), forward=_gather,
    vjps=(lambda w, ans, t, x, **attrs: POOL_SCATTER(w, x, **attrs), _zeros_like_x),
    jvps=(lambda s, ans, t, x, **attrs: POOL_GATHER(s, x, **attrs), _zeros_like_out),
    doc="each window's share of t summed",
)  # fmt: skip


def _max_pool(rank: int):
    def forward(x, ksize, strides, padding, data_format):
        geo = geometry(x.shape, ksize, strides, padding, data_format, rank)
        return np.max(windows(x, geo, -np.inf), axis=_window_axes(rank))

    return forward


def _avg_pool(rank: int):
    def forward(x, ksize, strides, padding, data_format):
        geo = geometry(x.shape, ksize, strides, padding, data_format, rank)
        total = np.sum(windows(x, geo, 0.0), axis=_window_axes(rank))
        return total / _counts(x.shape, geo, total.dtype)

    return forward


def _tf_pool(kind: str, rank: int):
    """tf.nn.<kind>_pool<rank>d, channels last; a channels-first layout by transposes
    (TensorFlow's CPU kernels have NHWC only)."""

    def build(tf, x, ksize, strides, padding, data_format):
        fn = getattr(tf.nn, f"{kind}_pool{rank}d")
        steps = ksize if strides is None else strides
        if data_format.endswith("C"):
            return fn(x, ksize, steps, padding)
        last = [0, *range(2, rank + 2), 1]
        first = [0, rank + 1, *range(1, rank + 1)]
        return tf.transpose(fn(tf.transpose(x, last), ksize, steps, padding), first)

    return build


def pool_names(x, ksize, strides, padding, data_format, rank) -> dict[str, Any]:
    """The names the pools' rule texts use beside g, y, x and the attributes: ksize and
    strides one per spatial axis, `spatial` those axes, `pad_width` np.pad's padding of x,
    `strided` the index keeping every stride-th window, `unpadded` x's place in the padded
    array, `tf_ksize`/`tf_strides` the raw ops' 4-D lists (NHWC; 1-D pools as H = 1)."""
    geo = geometry(tuple(x.shape), ksize, strides, padding, data_format, rank)
    one = (1,) * (2 - rank)
    return {
        "ksize": geo.ksize, "strides": geo.strides, "spatial": geo.spatial,
        "pad_width": _pad_width(len(x.shape), geo), "strided": _strided(len(x.shape), geo),
        "unpadded": _unpadded(len(x.shape), geo, tuple(x.shape)),
        "tf_ksize": [1, *one, *geo.ksize, 1], "tf_strides": [1, *one, *geo.strides, 1],
    }  # fmt: skip


def _texts(kind: str, rank: int) -> dict[str, tuple[str, ...]]:
    """Rule texts in the names of `pool_names` (channels-last layouts in TensorFlow's)."""
    axes = ", ".join(str(a) for a in _window_axes(rank))
    new = ", ".join(["None"] * rank)
    view = "np.lib.stride_tricks.sliding_window_view"
    lift = (lambda a: f"{a}[:, None]") if rank == 1 else (lambda a: a)
    drop = (lambda a: f"{a}[:, 0]") if rank == 1 else (lambda a: a)
    scatter = (
        f"z = np.zeros(np.pad(x, pad_width).shape); "
        f"np.add.at({view}(z, ksize, spatial, writeable=True)[strided], (), s); z[unpadded]"
    )
    if kind == "max":
        first = (
            f"w = {view}(np.pad(x, pad_width, constant_values=-np.inf), ksize, spatial)"
            f"[strided]; hit = (w == y[..., {new}]).reshape(*y.shape, -1); "
            f"hit = (hit & (np.cumsum(hit, -1) == 1)).reshape(w.shape)"
        )
        rule = f"{first}; s = g[..., {new}] * hit; {scatter}"
        jvp = (
            f"{first}; np.sum({view}(np.pad(t, pad_width), ksize, spatial)[strided] * hit, "
            f"({axes}))"
        )
        raw = "orig_input={x}, orig_output={y}, grad={g}, ksize=tf_ksize, strides=tf_strides, padding=padding"  # noqa: E501
        tf_rule = drop(
            "tf.raw_ops.MaxPoolGrad(" + raw.format(x=lift("x"), y=lift("y"), g=lift("g")) + ")"
        )
        tf_jvp = drop(
            "tf.raw_ops.MaxPoolGradGrad(" + raw.format(x=lift("x"), y=lift("y"), g=lift("t")) + ")"
        )
    else:
        count = (
            f"n = np.sum({view}(np.pad(np.ones_like(x), pad_width), ksize, spatial)[strided], "
            f"({axes}))"
        )
        rule = f"{count}; s = (g / n)[..., {new}] * np.ones(ksize); {scatter}"
        jvp = (
            f"avg_pool{rank}d(t, ksize=ksize, strides=strides, padding=padding, "
            "data_format=data_format)"
        )
        shape = "tf.shape(x[:, None])" if rank == 1 else "tf.shape(x)"
        tf_rule = drop(
            f"tf.raw_ops.AvgPoolGrad(orig_input_shape={shape}, grad={lift('g')}, "
            "ksize=tf_ksize, strides=tf_strides, padding=padding)"
        )
        tf_jvp = f"tf.nn.avg_pool{rank}d(t, ksize, strides, padding)"
    unwritten = ("torch_rules", "torch_jvp_rules", "jax_rules", "jax_jvp_rules")
    return {"rules": (rule,), "tf_rules": (tf_rule,), "jvp_rules": (jvp,),
            "tf_jvp_rules": (tf_jvp,), **dict.fromkeys(unwritten, (None,))}  # fmt: skip


def _declare(kind: str, rank: int) -> None:
    name = f"{kind}_pool{rank}d"
    fmt = _FORMATS[rank][0]
    attrs = {"ksize": None, "strides": None, "padding": "VALID", "data_format": fmt}
    if kind == "max":
        forward, kink = _max_pool(rank), "window"
        vjp = lambda g, ans, x, **a: POOL_SCATTER(g, x, mode="max", rank=rank, **a)
        jvp = lambda t, ans, x, **a: POOL_GATHER(t, x, mode="max", rank=rank, **a)
        doc = "the maximum of each window; a tie's gradient goes to the first maximum"
    else:
        forward, kink = _avg_pool(rank), None
        vjp = lambda g, ans, x, **a: POOL_SCATTER(g, x, mode="avg", rank=rank, **a)
        jvp = lambda t, ans, x, **a: get_op(name)(t, **a)
        doc = "the mean of each window's in-bounds elements (SAME pads are not counted)"
    register(Op(
        name=name, params=("x",), attrs=attrs, shape=_shape(rank), forward=forward,
        vjps=(vjp,), jvps=(jvp,), tf=_tf_pool(kind, rank),
        tf_name=f"tf.nn.{name} (NCHW/NCW through transposes: TensorFlow's CPU kernels are NHWC)",
        doc=doc, kink=kink,
        attr_choices={"ksize": (1, 2, 3), "strides": (None, 1, 2), "padding": ("VALID", "SAME"),
                      "data_format": _FORMATS[rank]},
        **_texts(kind, rank),
    ))  # fmt: skip


def window_ties(x, ksize, strides, padding, data_format, rank):
    """Elements of x tied for the maximum of some window (a max-pool's tie)."""
    geo = geometry(tuple(x.shape), ksize, strides, padding, data_format, rank)
    w = windows(x, geo, -np.inf)
    winners = w == np.max(w, axis=_window_axes(rank), keepdims=True)
    tied = winners & (np.sum(winners, axis=_window_axes(rank), keepdims=True) > 1)
    return _scatter_shares(tied.astype(np.float64), x.shape, geo) > 0


def window_distance(x, ksize, strides, padding, data_format, rank):
    """How far each element of x is from a max-pool tie: 0 tied, inf where it is some
    window's sole maximum and no other's runner-up, else the least gap to a maximum."""
    geo = geometry(tuple(x.shape), ksize, strides, padding, data_format, rank)
    w = windows(x, geo, -np.inf)
    best = np.max(w, axis=_window_axes(rank), keepdims=True)
    behind = best - w
    winners = behind == 0
    tied = winners & (np.sum(winners, axis=_window_axes(rank), keepdims=True) > 1)
    per_window = np.where(winners & ~tied, np.inf, behind)
    return _scatter_min(per_window, x.shape, geo)


def _scatter_shares(shares, shape: Shape, geo: Geometry):
    padded = np.zeros([n + sum(p) for n, p in zip(shape, _pad_width(len(shape), geo), strict=True)])
    view = np.lib.stride_tricks.sliding_window_view(
        padded, geo.ksize, axis=geo.spatial, writeable=True
    )[_strided(len(shape), geo)]
    np.add.at(view, (), shares)
    return padded[_unpadded(len(shape), geo, tuple(shape))]


def _scatter_min(values, shape: Shape, geo: Geometry):
    padded = np.full(
        [n + sum(p) for n, p in zip(shape, _pad_width(len(shape), geo), strict=True)], np.inf
    )
    view = np.lib.stride_tricks.sliding_window_view(
        padded, geo.ksize, axis=geo.spatial, writeable=True
    )[_strided(len(shape), geo)]
    np.minimum.at(view, (), values)
    return padded[_unpadded(len(shape), geo, tuple(shape))]


for _rank in (2, 1):
    for _kind in ("max", "avg"):
        _declare(_kind, _rank)
