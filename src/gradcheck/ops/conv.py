"""Convolutions (SPEC §3.1): conv1d, conv2d and conv2d_transpose, as TensorFlow computes them.

Each op reads its attributes into one geometry (`Geometry`: the layouts' transposes to
channels last and to a ``(*kernel, in, out)`` filter, the strides, the explicit pads,
the dilations and the groups), checked with errors that name the attribute and what it
may be, then computes in that layout with the im2col ops of `im2col` — whose VJPs and
JVPs are each other, so every rule here is a transpose, an im2col op, and a transpose
back. Padding is TensorFlow's: 'VALID', 'SAME' (the output is ceil(size / stride) and
an odd total pad puts the extra element after), an int for every side, or one
``[before, after]`` pair per spatial axis.

TensorFlow's CPU kernels have no NCHW convolution, no gradient of a dilated or grouped
one and no explicit padding for conv1d, so the reference builds what they have: NHWC
through transposes, the pads by ``tf.pad``, the dilated filter with zeros between its
taps, and a grouped convolution as one per group, concatenated.

The rules in PyTorch spelling are its own adjoints (``torch.nn.grad.conv2d_input`` and
``conv2d_weight``, ``F.conv_transpose2d``) channels first, after ``movedim``s and an
``F.pad`` for TensorFlow's pads (``F.pad`` with negated pads crops them off again); in JAX
spelling, ``jax.vjp`` of ``lax.conv_general_dilated``, whose dimension numbers take the
formats as they are. Both name what `conv_names` gives.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from ..util.lazy_numpy import np
from .broadcast import fmt_shape
from .conv_geometry import FORMATS, Geometry, geometry, is_int, moved, out_shape, relaid
from .im2col import CONV, CONV_FILTER_GRAD, CONV_INPUT_GRAD, expansion
from .registry import Op, ShapeError, register

# -- conv1d and conv2d ------------------------------------------------------------------

# The rules in PyTorch and JAX spelling, in the names of `conv_names`. PyTorch pads by
# F.pad (its padding= cannot pad unevenly, as TensorFlow's SAME does) and crops the
# gradient by F.pad with the pads negated.
_TORCH_IN = "torch.nn.functional.pad({}.movedim(channels, 1), torch_pads)"
_TORCH_VJPS = (
    f"xp = {_TORCH_IN.format('x')}; gx = torch.nn.grad.conv{{rank}}d_input(xp.shape, "
    "w.movedim(filter_axes, (0, 1)), g.movedim(channels, 1), stride, 0, dilation, groups); "
    "torch.nn.functional.pad(gx, [-p for p in torch_pads]).movedim(1, channels)",
    f"torch.nn.grad.conv{{rank}}d_weight({_TORCH_IN.format('x')}, "
    "w.movedim(filter_axes, (0, 1)).shape, g.movedim(channels, 1), stride, 0, dilation, "
    "groups).movedim((0, 1), filter_axes)",
)
_TORCH_CONV = (
    f"torch.nn.functional.conv{{rank}}d({_TORCH_IN.format('{x}')}, "
    "{w}.movedim(filter_axes, (0, 1)), None, stride, 0, dilation, groups).movedim(1, channels)"
)
_JAX_CONV = (
    "conv = lambda x, w: jax.lax.conv_general_dilated(x, w, stride, pads, rhs_dilation=dilation, "
    "dimension_numbers=(data_format, filter_format, data_format), feature_group_count=groups); "
)


def _conv_geo(rank: int, x, w, attrs: dict[str, Any]) -> Geometry:
    return geometry(rank, tuple(x), tuple(w), **attrs)


def _conv_op(rank: int, name: str, data: str, filt: str, tf_fn: Any) -> Op:
    def geo(x, w, **attrs):
        return _conv_geo(rank, np.shape(x), np.shape(w), attrs)

    def shape(x, w, **attrs):
        return out_shape(_conv_geo(rank, x, w, attrs), x, w)

    def forward(x, w, **attrs):
        g = geo(x, w, **attrs)
        return relaid(CONV(relaid(x, g.x_perm), relaid(w, g.w_perm), **g.attrs), g.x_back)

    def vjp_x(g, ans, x, w, **attrs):
        o = geo(x, w, **attrs)
        xc = relaid(x, o.x_perm)
        gx = CONV_INPUT_GRAD(
            relaid(g, o.x_perm), relaid(w, o.w_perm), x_shape=tuple(xc.shape), **o.attrs
        )
        return relaid(gx, o.x_back)

    def vjp_w(g, ans, x, w, **attrs):
        o = geo(x, w, **attrs)
        wc = relaid(w, o.w_perm)
        gw = CONV_FILTER_GRAD(
            relaid(x, o.x_perm), relaid(g, o.x_perm), w_shape=tuple(wc.shape), **o.attrs
        )
        return relaid(gw, o.w_back)

    def jvp_x(t, ans, x, w, **attrs):
        return forward(t, w, **attrs)

    def jvp_w(t, ans, x, w, **attrs):
        return forward(x, t, **attrs)

    def scratch(x, w, **attrs):
        o = _conv_geo(rank, x, w, attrs)
        return expansion(moved(x, o.x_perm), moved(w, o.w_perm), o.strides, o.pads,
                         o.dilations)  # fmt: skip

    def tf(tf, x, w, **attrs):
        return tf_fn(tf, x, w, _conv_geo(rank, x.shape.as_list(), w.shape.as_list(), attrs))

    every = "strides, padding, dilations, groups, data_format, filter_format"
    keywords = ", ".join(f"{a}={a}" for a in every.split(", "))
    return Op(
        name=name, params=("x", "w"), shape=shape, forward=forward,
        attrs={"strides": 1, "padding": "VALID", "dilations": 1, "groups": 1,
               "data_format": data, "filter_format": filt},
        vjps=(vjp_x, vjp_w), jvps=(jvp_x, jvp_w), tf=tf,
        tf_name=f"tf.nn.{name}",
        doc=f"TensorFlow's {name} (cross-correlation), x {data} or {FORMATS[rank][0][1]}, "
            f"w {filt} or {FORMATS[rank][1][1]}; the TF reference pads with tf.pad, goes "
            "through NHWC/HWIO by transposes, dilates the filter with zeros and runs one "
            "convolution per group (TF's CPU kernels have no NCHW, dilated or grouped "
            "gradient)",
        rules=(f"conv_backprop_input(g, w, x.shape, {every})",
               f"conv_backprop_filter(x, g, w.shape, {every})"),
        tf_rules=(
            "tf.nn.conv2d_transpose(g, w, x.shape, strides, padding, data_format, dilations)"
            if rank == 2 else
            "tf.squeeze(tf.nn.conv2d_transpose(g[:, None], w[None], [x.shape[0], 1, *x.shape[1:]],"
            " strides, padding, dilations=dilations), 1)",
            "tf.compat.v1.nn.conv2d_backprop_filter(x, w.shape, g, [1, strides, strides, 1], "
            "padding, data_format=data_format, dilations=[1, dilations, dilations, 1])"
            if rank == 2 else
            "tf.compat.v1.nn.conv2d_backprop_filter(x[:, None], [1, *w.shape], g[:, None], "
            "[1, 1, strides, 1], padding, dilations=[1, 1, dilations, 1])[0]"),
        jvp_rules=(f"{name}(t, w, {keywords})", f"{name}(x, t, {keywords})"),
        tf_jvp_rules=(f"tf.nn.{name}(t, w, strides, padding, data_format=data_format, "
                      "dilations=dilations)",
                      f"tf.nn.{name}(x, t, strides, padding, data_format=data_format, "
                      "dilations=dilations)"),
        torch_rules=tuple(text.format(rank=rank) for text in _TORCH_VJPS),
        torch_jvp_rules=(_TORCH_CONV.format(rank=rank, x="t", w="w"),
                         _TORCH_CONV.format(rank=rank, x="x", w="t")),
        jax_rules=(_JAX_CONV + "jax.vjp(conv, x, w)[1](g)[0]",
                   _JAX_CONV + "jax.vjp(conv, x, w)[1](g)[1]"),
        jax_jvp_rules=(_JAX_CONV + "conv(t, w)", _JAX_CONV + "conv(x, t)"),
        attr_choices={"strides": (1, 2), "padding": ("VALID", "SAME", 1),
                      "dilations": (1, 2), "groups": (1, 2), "data_format": FORMATS[rank][0],
                      "filter_format": FORMATS[rank][1]},
        scratch=scratch,
    )  # fmt: skip


def _tf_dilated(tf, w, dilations):
    """The filter with dilation - 1 zeros between its taps along each spatial axis."""
    for a, d in enumerate(dilations):
        if d == 1:
            continue
        k = w.shape[a]
        spread = tf.concat([tf.expand_dims(w, a + 1)] + [tf.zeros_like(tf.expand_dims(w, a + 1))]
                           * (d - 1), a + 1)  # fmt: skip
        shape = [*w.shape[:a], k * d, *w.shape[a + 1 :]]
        w = tf.gather(tf.reshape(spread, shape), tf.range((k - 1) * d + 1), axis=a)
    return w


def _tf_conv(tf, x, w, geo: Geometry):
    rank = len(x.shape) - 2
    x = x if geo.x_perm is None else tf.transpose(x, geo.x_perm)
    w = w if geo.w_perm is None else tf.transpose(w, geo.w_perm)
    if any(p for pair in geo.pads for p in pair):
        x = tf.pad(x, [[0, 0], *map(list, geo.pads), [0, 0]])
    w = _tf_dilated(tf, w, geo.dilations)

    def one(x, w):
        if rank == 1:
            return tf.nn.conv1d(x, w, geo.strides[0], "VALID")
        return tf.nn.conv2d(x, w, [1, *geo.strides, 1], "VALID")

    if geo.groups == 1:
        y = one(x, w)
    else:
        parts = zip(tf.split(x, geo.groups, -1), tf.split(w, geo.groups, -1), strict=True)
        y = tf.concat([one(xg, wg) for xg, wg in parts], -1)
    return y if geo.x_back is None else tf.transpose(y, geo.x_back)


# -- conv2d_transpose -------------------------------------------------------------------


def _transpose_geo(x, w, output_shape, strides, padding, data_format) -> Geometry:
    if not (
        isinstance(output_shape, (list, tuple))
        and len(output_shape) == 4
        and all(is_int(v) and v >= 1 for v in output_shape)
    ):
        raise ShapeError(
            f"output_shape={output_shape!r}: output_shape must be the output's full shape, "
            f"4 sizes >= 1 in {data_format} order"
        )
    out = tuple(int(v) for v in output_shape)
    geo = geometry(2, out, tuple(w), strides, padding, 1, 1, data_format, "HWIO", "the output")
    want = out_shape(geo, out, tuple(w))
    if tuple(x) != want:
        raise ShapeError(
            f"x has shape {fmt_shape(x)}; an output of shape {fmt_shape(out)} with strides="
            f"{strides!r}, padding={padding!r} needs x of shape {fmt_shape(want)} (w is "
            "[H, W, out, in])"
        )
    return geo


def _transpose_shape(x, w, output_shape, strides, padding, data_format):
    _transpose_geo(x, w, output_shape, strides, padding, data_format)
    return tuple(int(v) for v in output_shape)


def _transpose_forward(x, w, output_shape, strides, padding, data_format):
    geo = _transpose_geo(np.shape(x), np.shape(w), output_shape, strides, padding, data_format)
    out = moved(tuple(int(v) for v in output_shape), geo.x_perm)
    y = CONV_INPUT_GRAD(relaid(x, geo.x_perm), w, x_shape=out, **geo.attrs)
    return relaid(y, geo.x_back)


def _transpose_vjp_x(g, ans, x, w, output_shape, strides, padding, data_format):
    geo = _transpose_geo(np.shape(x), np.shape(w), output_shape, strides, padding, data_format)
    return relaid(CONV(relaid(g, geo.x_perm), w, **geo.attrs), geo.x_back)


def _transpose_vjp_w(g, ans, x, w, output_shape, strides, padding, data_format):
    geo = _transpose_geo(np.shape(x), np.shape(w), output_shape, strides, padding, data_format)
    return CONV_FILTER_GRAD(
        relaid(g, geo.x_perm), relaid(x, geo.x_perm), w_shape=tuple(w.shape), **geo.attrs
    )


def _transpose_scratch(x, w, output_shape, strides, padding, data_format):
    geo = _transpose_geo(x, w, output_shape, strides, padding, data_format)
    out = moved(tuple(output_shape), geo.x_perm)
    return expansion(out, tuple(w), geo.strides, geo.pads, geo.dilations)


def _output_shapes(x: tuple) -> list[list[int]]:
    """conv2d_transpose's output shapes to fuzz beside an x of shape `x` (NHWC or NCHW):
    the sizes strides 1 and 2 reach from each spatial size n with kernels up to 3, 1 to 3
    channels, at most 64 elements (the fuzzer's largest value); the shape rule keeps
    those that fit w and the other attributes."""
    if len(x) != 4:
        return []

    def sizes(n: int) -> list[int]:
        return sorted({n, n + 1, n + 2, 2 * n - 1, 2 * n, 2 * n + 1})

    n, found = x[0], []
    for h, w, c in itertools.product(sizes(x[1]), sizes(x[2]), (1, 2, 3)):
        found.append([n, h, w, c])  # NHWC: x's spatial axes 1 and 2
    for h, w, c in itertools.product(sizes(x[2]), sizes(x[3]), (1, 2, 3)):
        found.append([n, c, h, w])  # NCHW: 2 and 3
    return [s for s in found if math.prod(s) <= 64]


def _tf_transpose(tf, x, w, output_shape, strides, padding, data_format):
    geo = _transpose_geo(x.shape.as_list(), w.shape.as_list(), output_shape, strides, padding,
                         data_format)  # fmt: skip
    x = x if geo.x_perm is None else tf.transpose(x, geo.x_perm)
    out = list(moved(tuple(output_shape), geo.x_perm))
    pads = [[0, 0], *map(list, geo.pads), [0, 0]]
    y = tf.nn.conv2d_transpose(x, w, out, [1, *geo.strides, 1], pads)
    return y if geo.x_back is None else tf.transpose(y, geo.x_back)


# The conv ops' adjoints as the rule texts name them, in the ops' own layouts.
def conv_backprop_input(g, w, x_shape, strides, padding, dilations, groups, data_format,
                        filter_format):  # fmt: skip
    """The VJP of conv1d/conv2d in x: the cotangent's windows' shares added back."""
    rank = len(x_shape) - 2
    attrs = dict(strides=strides, padding=padding, dilations=dilations, groups=groups,
                 data_format=data_format, filter_format=filter_format)  # fmt: skip
    o = _conv_geo(rank, tuple(x_shape), np.shape(w), attrs)
    xc = moved(tuple(x_shape), o.x_perm)
    gx = CONV_INPUT_GRAD(relaid(g, o.x_perm), relaid(w, o.w_perm), x_shape=xc, **o.attrs)
    return relaid(gx, o.x_back)


def conv_backprop_filter(x, g, w_shape, strides, padding, dilations, groups, data_format,
                         filter_format):  # fmt: skip
    """The VJP of conv1d/conv2d in w: x's windows contracted with the cotangent."""
    rank = np.ndim(x) - 2
    attrs = dict(strides=strides, padding=padding, dilations=dilations, groups=groups,
                 data_format=data_format, filter_format=filter_format)  # fmt: skip
    o = _conv_geo(rank, np.shape(x), tuple(w_shape), attrs)
    wc = moved(tuple(w_shape), o.w_perm)
    gw = CONV_FILTER_GRAD(relaid(x, o.x_perm), relaid(g, o.x_perm), w_shape=wc, **o.attrs)
    return relaid(gw, o.w_back)


RULE_NAMES = {"conv_backprop_input": conv_backprop_input,
              "conv_backprop_filter": conv_backprop_filter}  # fmt: skip


def conv_names(name: str, x: Any, w: Any, **attrs: Any) -> dict[str, Any]:
    """The names the convolutions' PyTorch and JAX texts use beside g, y, x, w and the
    attributes: `stride` and `dilation` one per spatial axis, `pads` one (before, after)
    pair per spatial axis (TensorFlow's SAME worked out), `torch_pads` them as F.pad takes
    them (last axis first), `channels` the channel axis of x (and of y), `filter_axes`
    w's output- and input-channel axes; conv2d_transpose's `output_padding` is
    F.conv_transpose2d's, what its padded output has past (n - 1) * stride + kernel."""
    x, w = tuple(np.shape(x)), tuple(np.shape(w))
    if name == "conv2d_transpose":
        geo = _transpose_geo(x, w, **attrs)
        out = moved(tuple(attrs["output_shape"]), geo.x_perm)[1:3]
        padded = [o + sum(p) for o, p in zip(out, geo.pads, strict=True)]
        sizes = zip(moved(x, geo.x_perm)[1:3], geo.strides, w[:2], strict=True)
        reach = [(n - 1) * s + k for n, s, k in sizes]
        extra = {"output_padding": tuple(p - r for p, r in zip(padded, reach, strict=True))}
    else:
        geo = _conv_geo(len(x) - 2, x, w, attrs)
        axes = tuple(attrs["filter_format"].index(a) for a in "OI")
        extra = {"dilation": geo.dilations, "filter_axes": axes}
    return {"stride": geo.strides, "pads": geo.pads,
            "torch_pads": [p for pair in reversed(geo.pads) for p in pair],
            "channels": attrs["data_format"].index("C"), **extra}  # fmt: skip


_TRANSPOSE = ", ".join(f"{a}={a}" for a in ("output_shape", "strides", "padding", "data_format"))
# conv2d_transpose in PyTorch spelling: TF's [H, W, out, in] filter is F.conv_transpose2d's
# (in, out, H, W), and its output, unpadded, is cropped by the pads; in JAX, the adjoint of
# conv2d in its input, by jax.vjp.
_TORCH_TRANSPOSED = (
    "y = torch.nn.functional.conv_transpose2d({x}.movedim(channels, 1), {w}.permute(3, 2, 0, 1),"
    " None, stride, 0, output_padding); "
    "torch.nn.functional.pad(y, [-p for p in torch_pads]).movedim(1, channels)"
)
_JAX_TRANSPOSED = (
    "conv = lambda y, w: jax.lax.conv_general_dilated(y, w, stride, pads, "
    "dimension_numbers=(data_format, 'HWIO', data_format)); "
)

# fmt: off
register(_conv_op(1, "conv1d", "NWC", "WIO", _tf_conv))
register(_conv_op(2, "conv2d", "NHWC", "HWIO", _tf_conv))
register(Op(
    name="conv2d_transpose", params=("x", "w"),
    attrs={"output_shape": None, "strides": 1, "padding": "SAME", "data_format": "NHWC"},
    shape=_transpose_shape,
    forward=_transpose_forward, vjps=(_transpose_vjp_x, _transpose_vjp_w),
    jvps=(lambda t, ans, x, w, **a: _transpose_forward(t, w, **a),
          lambda t, ans, x, w, **a: _transpose_forward(x, t, **a)),
    tf=_tf_transpose, tf_name="tf.nn.conv2d_transpose",
    doc="tf.nn.conv2d_transpose: w is [H, W, out, in], output_shape the output's full shape "
        "(the adjoint of conv2d in x); NCHW through transposes on TF's CPU",
    rules=("conv2d(g, w, strides=strides, padding=padding, data_format=data_format)",
           "conv_backprop_filter(g, x, w.shape, strides, padding, 1, 1, data_format, 'HWIO')"),
    tf_rules=("tf.nn.conv2d(g, w, strides, padding, data_format)",
              "tf.compat.v1.nn.conv2d_backprop_filter(g, w.shape, x, [1, strides, strides, 1],"
              " padding, data_format=data_format)"),
    jvp_rules=(f"conv2d_transpose(t, w, {_TRANSPOSE})", f"conv2d_transpose(x, t, {_TRANSPOSE})"),
    tf_jvp_rules=("tf.nn.conv2d_transpose(t, w, output_shape, strides, padding, data_format)",
                  "tf.nn.conv2d_transpose(x, t, output_shape, strides, padding, data_format)"),
    torch_rules=(
        "torch.nn.functional.conv2d(torch.nn.functional.pad(g.movedim(channels, 1), torch_pads), "
        "w.permute(3, 2, 0, 1), None, stride).movedim(1, channels)",
        "torch.nn.grad.conv2d_weight(torch.nn.functional.pad(g.movedim(channels, 1), torch_pads), "
        "w.permute(3, 2, 0, 1).shape, x.movedim(channels, 1), stride).permute(2, 3, 1, 0)"),
    torch_jvp_rules=(_TORCH_TRANSPOSED.format(x="t", w="w"),
                     _TORCH_TRANSPOSED.format(x="x", w="t")),
    jax_rules=(_JAX_TRANSPOSED + "conv(g, w)", _JAX_TRANSPOSED + "jax.vjp(conv, g, w)[1](x)[1]"),
    jax_jvp_rules=(
        _JAX_TRANSPOSED + "jax.vjp(conv, jnp.zeros(output_shape, x.dtype), w)[1](t)[0]",
        _JAX_TRANSPOSED + "jax.vjp(conv, jnp.zeros(output_shape, x.dtype), t)[1](x)[0]"),
    attr_choices={"output_shape": _output_shapes, "strides": (1, 2),
                  "padding": ("SAME", "VALID"), "data_format": ("NHWC", "NCHW")},
    scratch=_transpose_scratch,
))
# fmt: on
