"""JAX's shape and indexing primitives as registry ops (`jax_primitives`): broadcasts and
views, concatenation, slices, pads and gathers (their indices are constants: a gather by
indices computed from the inputs has no gradient through them)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .lax_table import Eqn, constant_scalar, lax
from .program import call, index_text
from .tables import Emit, V, need

# -- shape ---------------------------------------------------------------------------------


@lax("broadcast_in_dim")
def _broadcast_in_dim(e: Emit, q: Eqn) -> str:
    x, out = q.x, tuple(int(n) for n in q.params["shape"])
    kept = [1] * len(out)
    for size, axis in zip(x.shape, q.params["broadcast_dimensions"], strict=True):
        kept[axis] = size
    text = x.text if tuple(kept) == x.shape else call("reshape", x.text, shape=kept)
    return text if tuple(kept) == out else call("broadcast_to", text, shape=list(out))


@lax("reshape")
def _reshape(e: Emit, q: Eqn) -> str:
    need(q.params.get("dimensions") is None, "a reshape that transposes first")
    return call("reshape", q.x.text, shape=[int(n) for n in q.params["new_sizes"]])


@lax("transpose")
def _transpose(e: Emit, q: Eqn) -> str:
    perm = [int(p) for p in q.params["permutation"]]
    return q.x.text if perm == sorted(perm) else call("transpose", q.x.text, perm=perm)


@lax("squeeze")
def _squeeze(e: Emit, q: Eqn) -> str:
    dims = [int(d) for d in q.params["dimensions"]]
    return call("squeeze", q.x.text, axis=dims) if dims else q.x.text


@lax("concatenate")
def _concatenate(e: Emit, q: Eqn) -> str:
    parts = [v.text for v in q.args if 0 not in v.shape]
    return call("concat", f"[{', '.join(parts)}]", axis=int(q.params["dimension"]))


@lax("stack")
def _stack(e: Emit, q: Eqn) -> str:
    return call("stack", f"[{', '.join(v.text for v in q.args)}]", axis=int(q.params["axis"]))


@lax("tile")
def _tile(e: Emit, q: Eqn) -> str:
    return call("tile", q.x.text, reps=[int(r) for r in q.params["reps"]])


@lax("rev")
def _rev(e: Emit, q: Eqn) -> str:
    dims = [int(d) for d in q.params["dimensions"]]
    return call("flip", q.x.text, axis=dims) if dims else q.x.text


@lax("split")
def _split(e: Emit, q: Eqn) -> list[str]:
    sizes = [int(s) for s in q.params["sizes"]]
    parts = e.bind(call("split", q.x.text, num_or_sizes=sizes, axis=int(q.params["axis"])), "parts")
    return [f"{parts}[{i}]" for i in range(len(sizes))]


# -- slices --------------------------------------------------------------------------------


def _sliced(x: V, starts: list[int], stops: list[int], steps: list[int]) -> str:
    """``x[...]`` for one slice per axis, the trivial parts left out."""
    index = []
    for n, start, stop, step in zip(x.shape, starts, stops, steps, strict=True):
        index.append(slice(start or None, None if stop >= n else stop, None if step == 1 else step))
    while index and index[-1] == slice(None):
        index.pop()
    return index_text(x.text, index) if index else x.text


@lax("slice")
def _slice(e: Emit, q: Eqn) -> str:
    x = q.x
    starts, stops = q.params["start_indices"], q.params["limit_indices"]
    steps = q.params["strides"] or [1] * x.ndim
    return _sliced(x, [int(s) for s in starts], [int(s) for s in stops], [int(s) for s in steps])


@lax("dynamic_slice")
def _dynamic_slice(e: Emit, q: Eqn) -> str:
    x, *starts = q.args
    sizes = [int(s) for s in q.params["slice_sizes"]]
    # JAX clamps each start so that the slice stays inside the operand
    begin = [min(max(int(constant_scalar(s)), 0), n - k)
             for s, n, k in zip(starts, x.shape, sizes, strict=True)]  # fmt: skip
    return _sliced(x, begin, [b + k for b, k in zip(begin, sizes, strict=True)], [1] * x.ndim)


@lax("pad")
def _pad(e: Emit, q: Eqn) -> str:
    x, fill = q.args
    value = constant_scalar(fill)
    config = [tuple(int(n) for n in c) for c in q.params["padding_config"]]
    need(all(lo >= 0 and hi >= 0 for lo, hi, _ in config), "a negative pad (a crop)")
    text = x.text
    for axis, (_, _, interior) in enumerate(config):
        if interior:
            # interior padding is needle's dilate with the trailing zeros cut off
            need(value == 0, "interior padding by a value other than 0")
            n = x.shape[axis]
            dilated = e.bind(call("dilate", text, axes=[axis], dilation=interior), "dilated")
            text = e.bind(_cut(dilated, axis, n + (n - 1) * interior), "dilated")
    pairs = [[lo, hi] for lo, hi, _ in config]
    if not any(lo or hi for lo, hi in pairs):
        return text
    return call("pad", text, paddings=pairs, constant_values=value)


def _cut(text: str, axis: int, stop: int) -> str:
    return index_text(text, [slice(None)] * axis + [slice(None, stop)])


# -- gathers -------------------------------------------------------------------------------


@lax("gather")
def _gather(e: Emit, q: Eqn) -> str:
    x, indices = q.args
    need(indices.const, "a gather at indices computed from the inputs")
    dims = q.params["dimension_numbers"]
    out = tuple(q.out[0])
    ids = np.asarray(indices.value).astype(np.int64)
    if len(dims.start_index_map) == 1 and ids.shape[-1] == 1:
        axis = int(dims.start_index_map[0])
        picked = ids[..., 0]
        if picked.min(initial=0) >= 0 and picked.max(initial=0) < x.shape[axis]:
            taken = _take(e, q, x, picked, axis, out)
            if taken is not None:
                return taken
    return _flat_take(e, q, x, out)


def _take(e: Emit, q: Eqn, x: V, picked: np.ndarray, axis: int, out: tuple) -> str | None:
    """The two gathers jax.numpy writes: ``jnp.take(x, i, axis)`` and ``x[i]`` (whole slices
    of the other axes) as take; ``jnp.take_along_axis`` (the other axes batched) as
    take_along_axis. None for any other."""
    dims, sizes = q.params["dimension_numbers"], tuple(q.params["slice_sizes"])
    others = tuple(d for d in range(x.ndim) if d != axis)
    if tuple(dims.collapsed_slice_dims) != (axis,):
        return None
    whole = tuple(1 if d == axis else n for d, n in enumerate(x.shape))
    batch = picked.ndim
    offsets = (*range(axis), *range(axis + batch, batch + x.ndim - 1))
    if not dims.operand_batching_dims and sizes == whole and tuple(dims.offset_dims) == offsets:
        ids = e.constant(picked, "index", True)
        return call("take", x.text, ids, axis=axis)
    along = tuple(dims.operand_batching_dims) == others and not dims.offset_dims
    if along and tuple(dims.start_indices_batching_dims) == others and picked.shape == out:
        need(all(out[d] == x.shape[d] for d in others), "a take_along_axis that broadcasts")
        ids = e.constant(picked, "index", True)
        return call("take_along_axis", x.text, ids, axis=axis)
    return None


def _flat_take(e: Emit, q: Eqn, x: V, out: tuple) -> str:
    """Any other gather at constant indices picks elements of x: the same gather run on x's
    element numbers says which, and take of the flattened x picks them."""
    numbers = np.arange(x.value.size, dtype=np.int64).reshape(x.shape)
    params: dict[str, Any] = {**q.params, "fill_value": -1}
    picked = np.asarray(jax.lax.gather_p.bind(numbers, q.args[1].value, **params))
    need(bool((picked >= 0).all()), "a gather that fills out-of-range slices")
    flat = e.bind(call("reshape", x.text, shape=[-1]), "flat")
    ids = e.constant(picked.reshape(-1), "index", True)
    return call("reshape", e.bind(call("take", flat, ids, axis=0), "taken"), shape=list(out))
