"""ATen's shape and indexing ops as registry ops (`torch_aten`): views, concatenation,
slices and gathers, pads."""

from __future__ import annotations

import numpy as np

from .aten_table import ATEN, aten, axes_of, operand
from .program import call, index_text
from .tables import Emit, V, need

_BIG = 2**62  # slice ends at or past this are "to the end"

# -- shape -------------------------------------------------------------------------------

for _name in ("clone", "alias", "contiguous", "lift_fresh", "lift", "view_as", "positive"):
    ATEN[_name] = lambda e, a: a["self"].text


@aten("_to_copy", "to", "type_as")
def _to_copy(e: Emit, a: dict) -> str:
    x, dtype = a["self"], a.get("dtype")
    need(dtype is None or dtype == x.value.dtype, f"a cast to {dtype}")
    return x.text


@aten("view", "_unsafe_view", "reshape", "flatten", "unflatten")
def _reshape(e: Emit, a: dict) -> str:
    return call("reshape", a["self"].text, shape=list(a["__out__"][0]))


@aten("expand")
def _expand(e: Emit, a: dict) -> str:
    x, out = a["self"], list(a["__out__"][0])
    return x.text if tuple(out) == x.shape else call("broadcast_to", x.text, shape=out)


@aten("permute")
def _permute(e: Emit, a: dict) -> str:
    x = a["self"]
    return call("transpose", x.text, perm=[d % x.ndim for d in a["dims"]])


@aten("t", "numpy_T")
def _t(e: Emit, a: dict) -> str:
    x = a["self"]
    return x.text if x.ndim < 2 else call("transpose", x.text)


@aten("transpose")
def _transpose(e: Emit, a: dict) -> str:
    x = a["self"]
    if x.ndim == 0:
        return x.text
    return call("swapaxes", x.text, axis1=a["dim0"] % x.ndim, axis2=a["dim1"] % x.ndim)


@aten("unsqueeze")
def _unsqueeze(e: Emit, a: dict) -> str:
    x = a["self"]
    return call("expand_dims", x.text, axis=a["dim"] % (x.ndim + 1))


@aten("squeeze")
def _squeeze(e: Emit, a: dict) -> str:
    x = a["self"]
    dims = axes_of(a.get("dim"), x.ndim)
    dims = [d for d in (dims if dims is not None else range(x.ndim)) if x.shape[d] == 1]
    return call("squeeze", x.text, axis=dims) if dims else x.text


@aten("cat", "concat")
def _cat(e: Emit, a: dict) -> str:
    parts = [v for v in a["tensors"] if not (isinstance(v, V) and v.shape == (0,))]
    axis = a["dim"] % len(a["__out__"][0])
    return call("concat", f"[{', '.join(operand(v) for v in parts)}]", axis=axis)


@aten("stack")
def _stack(e: Emit, a: dict) -> str:
    axis = a["dim"] % len(a["__out__"][0])
    return call("stack", f"[{', '.join(operand(v) for v in a['tensors'])}]", axis=axis)


@aten("slice")
def _slice(e: Emit, a: dict) -> str:
    x = a["self"]
    dim = a["dim"] % x.ndim
    start, end, step = a["start"], a["end"], a["step"]
    end = None if end is not None and end >= min(_BIG, x.shape[dim]) else end
    start = start if start else None
    if start is None and end is None and step == 1:
        return x.text
    index = [slice(None)] * dim + [slice(start, end, None if step == 1 else step)]
    return index_text(x.text, index)


@aten("select")
def _select(e: Emit, a: dict) -> str:
    x = a["self"]
    dim = a["dim"] % x.ndim
    return index_text(x.text, [slice(None)] * dim + [a["index"]])


@aten("index")
def _index(e: Emit, a: dict) -> str:
    x, indices = a["self"], a["indices"]
    used = [(d, i) for d, i in enumerate(indices) if i is not None]
    need(len(used) == 1 and isinstance(used[0][1], V), "indexing by several tensors")
    dim, index = used[0]
    need(index.const and not index.value.is_floating_point(), "indexing by a mask")
    ids = e.constant(index.value.detach().numpy().astype(np.int64), "index", True)
    return call("take", x.text, ids, axis=dim)


@aten("gather")
def _gather(e: Emit, a: dict) -> str:
    x, index = a["self"], a["index"]
    dim = a["dim"] % x.ndim
    same = all(index.shape[d] == x.shape[d] for d in range(x.ndim) if d != dim)
    need(same and index.ndim == x.ndim, "a gather over a sub-block")
    ids = e.constant(index.value.detach().numpy().astype(np.int64), "index", True)
    return call("take_along_axis", x.text, ids, axis=dim)


@aten("embedding")
def _embedding(e: Emit, a: dict) -> str:
    need(a["padding_idx"] == -1 and not a["scale_grad_by_freq"], "embedding's padding_idx")
    ids = e.constant(a["indices"].value.detach().numpy().astype(np.int64), "ids", True)
    return call("take", a["weight"].text, ids, axis=0)


@aten(
    "split",
    "split_with_sizes",
    "unbind",
    "chunk",
    "unsafe_split",
    "unsafe_chunk",
    "unsafe_split_with_sizes",
)
def _split(e: Emit, a: dict) -> list:
    x, outs = a["self"], a["__out__"]
    dim = a.get("dim", 0) % x.ndim
    if a["__name__"] == "unbind":
        parts = e.bind(call("unstack", x.text, axis=dim), "parts")
    else:
        sizes = [s[dim] for s in outs]
        parts = e.bind(call("split", x.text, num_or_sizes=sizes, axis=dim), "parts")
    return [f"{parts}[{i}]" for i in range(len(outs))]


@aten("flip")
def _flip(e: Emit, a: dict) -> str:
    x = a["self"]
    return call("flip", x.text, axis=[d % x.ndim for d in a["dims"]])


@aten("roll")
def _roll(e: Emit, a: dict) -> str:
    x, dims = a["self"], a["dims"]
    need(bool(dims), "a roll of the flattened tensor")
    return call("roll", x.text, shift=list(a["shifts"]), axis=[d % x.ndim for d in dims])


@aten("repeat")
def _repeat(e: Emit, a: dict) -> str:
    x, reps = a["self"], list(a["repeats"])
    text = x.text
    if len(reps) > x.ndim:  # torch's repeat adds leading axes first
        text = call("reshape", text, shape=[1] * (len(reps) - x.ndim) + list(x.shape))
    return call("tile", text, reps=reps)


def _pairs(pad: list[int], ndim: int) -> list[list[int]]:
    """torch's flat pad (last axis first, before/after) as one pair per axis."""
    pairs = [[0, 0] for _ in range(ndim)]
    for k in range(len(pad) // 2):
        pairs[ndim - 1 - k] = [pad[2 * k], pad[2 * k + 1]]
    return pairs


@aten("constant_pad_nd")
def _pad(e: Emit, a: dict) -> str:
    x, pad = a["self"], list(a["pad"])
    need(all(p >= 0 for p in pad), "a negative pad (a crop)")
    value = float(a["value"])
    return call("pad", x.text, paddings=_pairs(pad, x.ndim), constant_values=value)


@aten("reflection_pad1d", "reflection_pad2d", "reflection_pad3d")
def _reflect(e: Emit, a: dict) -> str:
    x = a["self"]
    return call("pad", x.text, paddings=_pairs(list(a["padding"]), x.ndim), mode="reflect")
