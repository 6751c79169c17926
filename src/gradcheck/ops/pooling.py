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

from typing import Any

from ..util.lazy_numpy import np
from .pool_geometry import (
    FORMATS,
    Geometry,
    geometry,
    pad_width,
    strided,
    unpadded,
    window_axes,
    windows,
)
from .registry import Op, Shape, get_op, register


def _shape(rank: int):
    def shape(x: Shape, ksize=None, strides=None, padding="VALID", data_format=None) -> Shape:
        geo = geometry(x, ksize, strides, padding, data_format, rank)
        out = list(x)
        for axis, o in zip(geo.spatial, geo.out, strict=True):
            out[axis] = o
        return tuple(out)

    return shape


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
    winners = w == np.max(w, axis=window_axes(rank), keepdims=True)
    if ties == "split":
        return winners / np.sum(winners, axis=window_axes(rank), keepdims=True)
    flat = winners.reshape(*winners.shape[:-rank], -1)
    first = flat & (np.cumsum(flat, axis=-1) == 1)
    return first.reshape(winners.shape).astype(x.dtype)


def _weights(x, mode: str, geo: Geometry):
    """Each window element's share of the window's output: max's mask or avg's 1/count."""
    if mode == "avg":
        rank = len(geo.spatial)
        inside = windows(np.ones(x.shape, x.dtype), geo, 0.0)
        count = np.sum(inside, axis=window_axes(rank), keepdims=True)
        return inside / count
    return _max_weights(x, geo, "split" if mode == "max-split" else "first")


def _scatter(g, x, mode, ksize, strides, padding, data_format, rank):
    """Each window's share of g added back where the window sits (overlaps accumulate)."""
    geo = geometry(x.shape, ksize, strides, padding, data_format, rank)
    shares = np.expand_dims(g, window_axes(rank)) * _weights(x, mode, geo)
    padded = np.zeros(
        [n + sum(p) for n, p in zip(x.shape, pad_width(x.ndim, geo), strict=True)], shares.dtype
    )
    view = np.lib.stride_tricks.sliding_window_view(
        padded, geo.ksize, axis=geo.spatial, writeable=True
    )[strided(x.ndim, geo)]
    for offset in np.ndindex(*geo.ksize):  # one strided add per window element, not per pixel
        at = (Ellipsis, *offset)
        view[at] += shares[at]
    return padded[unpadded(x.ndim, geo, x.shape)]


def _gather(t, x, mode, ksize, strides, padding, data_format, rank):
    """Each window's share of t summed: t at max's maxima, avg's average of t."""
    geo = geometry(x.shape, ksize, strides, padding, data_format, rank)
    shares = windows(t, geo, 0.0) * _weights(x, mode, geo)
    return np.sum(shares, axis=window_axes(rank))


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
        return np.max(windows(x, geo, -np.inf), axis=window_axes(rank))

    return forward


def _avg_pool(rank: int):
    def forward(x, ksize, strides, padding, data_format):
        geo = geometry(x.shape, ksize, strides, padding, data_format, rank)
        total = np.sum(windows(x, geo, 0.0), axis=window_axes(rank))
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
    array, `tf_ksize`/`tf_strides` the raw ops' 4-D lists (NHWC; 1-D pools as H = 1);
    for the PyTorch texts `channels`, x's channel axis, and `torch_pads`, F.pad's padding
    (last axis first), for the JAX texts `window_dimensions`/`window_strides`, lax's window
    (1 on the batch and channel axes)."""
    geo = geometry(tuple(x.shape), ksize, strides, padding, data_format, rank)
    one = (1,) * (2 - rank)
    window, steps = [1] * len(x.shape), [1] * len(x.shape)
    for axis, k, s in zip(geo.spatial, geo.ksize, geo.strides, strict=True):
        window[axis], steps[axis] = k, s
    return {
        "ksize": geo.ksize, "strides": geo.strides, "spatial": geo.spatial,
        "pad_width": pad_width(len(x.shape), geo), "strided": strided(len(x.shape), geo),
        "unpadded": unpadded(len(x.shape), geo, tuple(x.shape)),
        "tf_ksize": [1, *one, *geo.ksize, 1], "tf_strides": [1, *one, *geo.strides, 1],
        "channels": data_format.index("C"),
        "torch_pads": [p for pair in reversed(geo.pads) for p in pair],
        "window_dimensions": tuple(window), "window_strides": tuple(steps),
    }  # fmt: skip


# A max-pool's rules in PyTorch and JAX spelling find each window's first maximum (in
# row-major order, as TensorFlow: PyTorch's return_indices does; lax.reduce_window over
# (value, index) pairs, the earlier index winning a tie), then scatter g to it or gather t
# from it. JAX's own derivatives of a max-pool are no rule for ties: its JVP's pick among
# tied elements follows the order the reduction runs in.
_TORCH_MAXIMA = (
    "xp = torch.nn.functional.pad(x.movedim(channels, 1), torch_pads, value=-torch.inf); "
    "at = torch.nn.functional.max_pool{rank}d(xp, ksize, strides, return_indices=True)[1]; "
)
_JAX_MAXIMA = (
    "i = jnp.arange(x.size).reshape(x.shape); first = lambda a, b: jax.tree.map(lambda u, v: "
    "jnp.where((a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1])), u, v), a, b); "
    "at = jax.lax.reduce_window((x, i), (-jnp.inf, x.size), first, window_dimensions, "
    "window_strides, pad_width)[1]; "
)
# An average-pool is linear: the zero-padded windows' sums (or means) over those of ones.
_TORCH_AVG = (
    "pool = lambda a: torch.nn.functional.avg_pool{rank}d(torch.nn.functional.pad("
    "a.movedim(channels, 1), torch_pads), ksize, strides).movedim(1, channels); "
)
_JAX_AVG = (
    "pool = lambda a: jax.lax.reduce_window(a, 0.0, jax.lax.add, window_dimensions, "
    "window_strides, pad_width); "
)


def _library_texts(kind: str, rank: int) -> dict[str, tuple[str, ...]]:
    """The rule texts in PyTorch and JAX spelling, in the names of `pool_names`."""
    if kind == "max":
        maxima = _TORCH_MAXIMA.format(rank=rank)
        torch_rule = (
            f"{maxima}z = torch.zeros_like(xp).flatten(2).scatter_add(2, at.flatten(2), "
            "g.movedim(channels, 1).flatten(2)); "
            "torch.nn.functional.pad(z.view_as(xp), [-p for p in torch_pads]).movedim(1, channels)"
        )
        torch_jvp = (
            f"{maxima}torch.nn.functional.pad(t.movedim(channels, 1), torch_pads).flatten(2)"
            ".gather(2, at.flatten(2)).view_as(at).movedim(1, channels)"
        )
        jax_rule = (
            f"{_JAX_MAXIMA}jnp.zeros(x.size, g.dtype).at[at.ravel()].add(g.ravel())"
            ".reshape(x.shape)"
        )
        jax_jvp = f"{_JAX_MAXIMA}t.ravel()[at]"
    else:
        avg = _TORCH_AVG.format(rank=rank)
        torch_rule = f"{avg}torch.func.vjp(pool, x)[1](g / pool(torch.ones_like(x)))[0]"
        torch_jvp = f"{avg}pool(t) / pool(torch.ones_like(t))"
        jax_rule = f"{_JAX_AVG}jax.vjp(pool, x)[1](g / pool(jnp.ones_like(x)))[0]"
        jax_jvp = f"{_JAX_AVG}pool(t) / pool(jnp.ones_like(t))"
    return {"torch_rules": (torch_rule,), "torch_jvp_rules": (torch_jvp,),
            "jax_rules": (jax_rule,), "jax_jvp_rules": (jax_jvp,)}  # fmt: skip


def _texts(kind: str, rank: int) -> dict[str, tuple[str, ...]]:
    """Rule texts in the names of `pool_names` (channels-last layouts in TensorFlow's)."""
    axes = ", ".join(str(a) for a in window_axes(rank))
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
    return {"rules": (rule,), "tf_rules": (tf_rule,), "jvp_rules": (jvp,),
            "tf_jvp_rules": (tf_jvp,), **_library_texts(kind, rank)}  # fmt: skip


def _declare(kind: str, rank: int) -> None:
    name = f"{kind}_pool{rank}d"
    fmt = FORMATS[rank][0]
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
                      "data_format": FORMATS[rank]},
        **_texts(kind, rank),
    ))  # fmt: skip


def window_ties(x, ksize, strides, padding, data_format, rank):
    """Elements of x tied for the maximum of some window (a max-pool's tie)."""
    geo = geometry(tuple(x.shape), ksize, strides, padding, data_format, rank)
    w = windows(x, geo, -np.inf)
    winners = w == np.max(w, axis=window_axes(rank), keepdims=True)
    tied = winners & (np.sum(winners, axis=window_axes(rank), keepdims=True) > 1)
    return _scatter_shares(tied.astype(np.float64), x.shape, geo) > 0


def window_distance(x, ksize, strides, padding, data_format, rank):
    """How far each element of x is from a max-pool tie: 0 tied, inf where it is some
    window's sole maximum and no other's runner-up, else the least gap to a maximum."""
    geo = geometry(tuple(x.shape), ksize, strides, padding, data_format, rank)
    w = windows(x, geo, -np.inf)
    best = np.max(w, axis=window_axes(rank), keepdims=True)
    behind = best - w
    winners = behind == 0
    tied = winners & (np.sum(winners, axis=window_axes(rank), keepdims=True) > 1)
    per_window = np.where(winners & ~tied, np.inf, behind)
    return _scatter_min(per_window, x.shape, geo)


def _scatter_shares(shares, shape: Shape, geo: Geometry):
    padded = np.zeros([n + sum(p) for n, p in zip(shape, pad_width(len(shape), geo), strict=True)])
    view = np.lib.stride_tricks.sliding_window_view(
        padded, geo.ksize, axis=geo.spatial, writeable=True
    )[strided(len(shape), geo)]
    np.add.at(view, (), shares)
    return padded[unpadded(len(shape), geo, tuple(shape))]


def _scatter_min(values, shape: Shape, geo: Geometry):
    padded = np.full(
        [n + sum(p) for n, p in zip(shape, pad_width(len(shape), geo), strict=True)], np.inf
    )
    view = np.lib.stride_tricks.sliding_window_view(
        padded, geo.ksize, axis=geo.spatial, writeable=True
    )[strided(len(shape), geo)]
    np.minimum.at(view, (), values)
    return padded[unpadded(len(shape), geo, tuple(shape))]


for _rank in (2, 1):
    for _kind in ("max", "avg"):
        _declare(_kind, _rank)
