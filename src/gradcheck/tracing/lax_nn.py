"""JAX's products, convolutions and windowed reductions as registry ops (`jax_primitives`),
and the few functions of JAX's own library the walk keeps whole (`jax_trace.WHOLE`):
``jax.nn.relu`` (a ``custom_jvp`` whose rule at 0 is TensorFlow's), ``jax.nn.silu`` and
``jax.nn.softplus``."""

from __future__ import annotations

from string import ascii_letters

import jax
import jax.numpy as jnp
import numpy as np

from ..ops.pooling import geometry
from .lax_table import LAX, Eqn, lax
from .program import call
from .tables import Emit, V, need

for _name in ("relu", "silu", "softplus"):
    LAX[_name] = lambda e, q, _op=_name: call(_op, q.x.text)


def _same_dtype(q: Eqn) -> None:
    """A product accumulated in a dtype as precise as the case's is the registry op's (as a
    cast is; bfloat16's in float32); in a less precise one it rounds, which no op says."""
    preferred = q.params.get("preferred_element_type")
    precise = preferred is None or jnp.finfo(preferred).nmant >= jnp.finfo(q.dtype).nmant
    need(precise, f"a {q.name} that accumulates in {preferred}")


# -- products ------------------------------------------------------------------------------


@lax("dot_general")
def _dot_general(e: Emit, q: Eqn) -> str:
    _same_dtype(q)
    a, b = q.args
    (ca, cb), (ba, bb) = q.params["dimension_numbers"]
    ca, cb, ba, bb = (tuple(int(d) for d in dims) for dims in (ca, cb, ba, bb))
    batch = tuple(range(a.ndim - 2))
    if a.ndim == b.ndim >= 2 and ba == bb == batch and ca == (a.ndim - 1,) and cb == (b.ndim - 2,):
        return f"{a.text} @ {b.text}"  # a (batched) matrix product: what matmul is
    return call("einsum", repr(_equation(a, b, ca, cb, ba, bb)), a.text, b.text)


def _equation(a: V, b: V, ca: tuple, cb: tuple, ba: tuple, bb: tuple) -> str:
    """dot_general as an einsum: the batch axes first, then a's free axes, then b's."""
    letters = iter(ascii_letters)
    left = [next(letters) for _ in range(a.ndim)]
    right: list[str] = [""] * b.ndim
    for i, j in (*zip(ca, cb, strict=True), *zip(ba, bb, strict=True)):
        right[j] = left[i]
    right = [r or next(letters) for r in right]
    out = [left[i] for i in ba]
    out += [left[i] for i in range(a.ndim) if i not in ca and i not in ba]
    out += [right[j] for j in range(b.ndim) if j not in cb and j not in bb]
    return f"{''.join(left)},{''.join(right)}->{''.join(out)}"


# -- convolutions --------------------------------------------------------------------------

# lhs/out specs (batch, feature, spatial...) and rhs specs (out, in, spatial...) of the
# registry's formats
_DATA = {2: {(0, 3, 1, 2): "NHWC", (0, 1, 2, 3): "NCHW"}, 1: {(0, 2, 1): "NWC", (0, 1, 2): "NCW"}}
_FILTER = {2: {(3, 2, 0, 1): "HWIO", (0, 1, 2, 3): "OIHW"}, 1: {(2, 1, 0): "WIO", (0, 1, 2): "OIW"}}


@lax("conv_general_dilated")
def _conv(e: Emit, q: Eqn) -> str:
    _same_dtype(q)
    x, w = q.args
    p = q.params
    rank = len(p["window_strides"])
    need(rank in (1, 2), f"a {rank}-d convolution")
    need(set(p["lhs_dilation"]) == {1}, "an input-dilated (transposed) convolution")
    need(p["batch_group_count"] == 1, "a convolution with batch groups")
    pads = [[int(lo), int(hi)] for lo, hi in p["padding"]]
    need(all(lo >= 0 and hi >= 0 for lo, hi in pads), "a convolution with negative padding")
    lhs, rhs, out = (tuple(int(d) for d in s) for s in p["dimension_numbers"])
    x_text, w_text = x.text, w.text
    # any other layout goes through the channels-last one by transposes, and back
    data = _DATA[rank].get(lhs) if out == lhs else None
    if data is None:
        data = "NHWC" if rank == 2 else "NWC"
        x_text = call("transpose", x_text, perm=[lhs[0], *lhs[2:], lhs[1]])
    filters = _FILTER[rank].get(rhs)
    if filters is None:
        filters = "HWIO" if rank == 2 else "WIO"
        w_text = call("transpose", w_text, perm=[*rhs[2:], rhs[1], rhs[0]])
    attrs = {"strides": [int(s) for s in p["window_strides"]], "padding": pads,
             "dilations": [int(d) for d in p["rhs_dilation"]],
             "groups": int(p["feature_group_count"]), "data_format": data}  # fmt: skip
    if filters in ("OIHW", "OIW"):
        attrs["filter_format"] = filters
    text = call(f"conv{rank}d", x_text, w_text, **attrs)
    if x_text == x.text and out == lhs:
        return text
    # the channels-last result, as the output spec lays it out
    back = [0] * (rank + 2)
    for position, axis in enumerate([out[0], *out[2:], out[1]]):
        back[axis] = position
    return text if back == sorted(back) else call("transpose", e.bind(text, "conv"), perm=back)


# -- windowed reductions -------------------------------------------------------------------


@lax("reduce_window_max", "reduce_window_min", "reduce_window_sum")
def _pool(e: Emit, q: Eqn) -> str:
    x, p = q.x, q.params
    rank = x.ndim - 2
    need(rank in (1, 2), f"a window over {x.ndim} axes")
    need(set(p["base_dilation"]) == {1} and set(p["window_dilation"]) == {1}, "a dilated window")
    window, strides = list(p["window_dimensions"]), list(p["window_strides"])
    pads = [tuple(int(n) for n in pad) for pad in p["padding"]]

    def still(axis: int) -> bool:  # an axis the window leaves alone: batch, channels
        return window[axis] == 1 and strides[axis] == 1 and pads[axis] == (0, 0)

    need(still(0), "a window over the batch axis")
    last = still(x.ndim - 1)
    need(last or still(1), "a window over every axis")
    data = ("NHWC" if rank == 2 else "NWC") if last else ("NCHW" if rank == 2 else "NCW")
    spatial = list(range(1, x.ndim - 1)) if last else list(range(2, x.ndim))
    ksize, steps = [int(window[a]) for a in spatial], [int(strides[a]) for a in spatial]
    padding = _padding(x, ksize, steps, [pads[a] for a in spatial], data, rank)
    kind = "avg" if q.name == "reduce_window_sum" else "max"
    text = x.text if q.name != "reduce_window_min" else e.bind(f"-{x.text}", "negated")
    pooled = call(f"{kind}_pool{rank}d", text, ksize=ksize, strides=steps, padding=padding,
                  data_format=data)  # fmt: skip
    if q.name == "reduce_window_min":
        return f"-{e.bind(pooled, 'pooled')}"
    if kind == "max":
        return pooled
    # a window sum is the average times how many elements each window has in bounds
    counts = _counts(x.shape, window, strides, pads)
    if np.all(counts == counts.reshape(-1)[0]):
        return f"{e.bind(pooled, 'pooled')} * {float(counts.reshape(-1)[0])!r}"
    return f"{e.bind(pooled, 'pooled')} * {e.constant(counts, 'counts', False)}"


def _padding(x: V, ksize: list, strides: list, pads: list, data: str, rank: int) -> str:
    """The pads as 'VALID' (none) or 'SAME' (TensorFlow's split); no other is exact."""
    if all(pad == (0, 0) for pad in pads):
        return "VALID"
    same = geometry(x.shape, ksize, strides, "SAME", data, rank).pads
    need([tuple(pad) for pad in same] == pads, "a window with pads other than VALID's or SAME's")
    return "SAME"


def _counts(shape: tuple, window: list, strides: list, pads: list) -> np.ndarray:
    ones = np.ones(shape)
    sums = jax.lax.reduce_window(ones, 0.0, jax.lax.add, window, strides, pads)
    return np.asarray(sums)
