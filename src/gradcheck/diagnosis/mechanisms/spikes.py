"""Spike probes (`windows`): where one output element's gradient goes.

The node is run alone on a cotangent that is 1 at one output element and 0 elsewhere, by
the engine and by the builtin engine; the two gradients say where that element's share
lands: for a max pool on the window's maximum (right), on every element of the window,
or on another one; for an average pool divided by the in-bounds count (right) or by the
full window at a padded border; for roll at the place the inverse shift puts it; for a
cumulative op on the positions before it (or after it, reversed). A pool's spikes must
also add up to the engine's answer on the case's own cotangent, so that what they show is
what the engine did there.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...ops.pool_geometry import geometry, windows
from .findings import Finding

if TYPE_CHECKING:
    from ..localisation.localise import NodeCheck
    from .probes import Prober

POOLS = frozenset(f"{kind}_pool{rank}d" for kind in ("max", "avg") for rank in (1, 2))
# Past this many output elements, one run per element costs more than it tells.
MAX_SPIKES = 512


def spike(shape: tuple[int, ...], index: tuple[int, ...], dtype: Any) -> np.ndarray:
    out = np.zeros(shape, dtype)
    out[index] = 1
    return out


def right_spike(check: NodeCheck, arg: int, index: tuple[int, ...]) -> np.ndarray:
    """The right VJP of argument `arg` for a cotangent that is 1 at `index` only."""
    g = spike(check.cotangent.shape, index, check.cotangent.dtype)
    return check.right(g).grads[f"a{arg}"]


def engine_spike(check: NodeCheck, arg: int, index: tuple[int, ...]) -> np.ndarray:
    """The engine's VJP of argument `arg` for a cotangent that is 1 at `index` only."""
    g = spike(check.cotangent.shape, index, check.cotangent.dtype)
    return np.asarray(check.run(check.engine_factory, g).grads[f"a{arg}"])


# -- pools --------------------------------------------------------------------------------


def pool_spikes(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """Each window's gradient, one window at a time, against where it belongs."""
    check = prober.check
    name = check.node.op.name
    g = check.cotangent
    if name not in POOLS or want.shape != got.shape or g.size > MAX_SPIKES:
        return None
    x = check.inputs["a0"]
    members, ksize = _window_members(name, x.shape, check.node.attrs)
    seen: dict[str, tuple[tuple[int, ...], np.ndarray, np.ndarray]] = {}
    total = np.zeros(got.shape, np.float64)
    for k in np.ndindex(g.shape):
        right, engine = right_spike(check, arg, k).ravel(), engine_spike(check, arg, k).ravel()
        total += g[k] * engine.reshape(got.shape)
        kind = _window_kind(check, name, right, engine, members[k], ksize)
        if kind is None:
            return None  # a window the engine treats in a way no mechanism here names
        if kind != "right":
            seen.setdefault(kind, (k, right, engine))
    if len(seen) != 1 or not check.same(total, got):
        return None
    [(kind, (k, right, engine))] = seen.items()
    return _POOL_FINDINGS[kind](k, right, engine, members[k], ksize, x.shape)


def _window_members(name: str, shape: tuple[int, ...], attrs: dict[str, Any]):
    """For each output element, the flat indices of x's in-bounds elements its window
    reads; and the window's full size."""
    rank = int(name[-2])
    geo = geometry(shape, attrs["ksize"], attrs["strides"], attrs["padding"],
                   attrs["data_format"], rank)  # fmt: skip
    index = windows(np.arange(math.prod(shape), dtype=np.float64).reshape(shape), geo, -1.0)
    flat = index.reshape(*index.shape[:-rank], -1)
    members = np.empty(flat.shape[:-1], object)
    for k in np.ndindex(members.shape):
        members[k] = flat[k][flat[k] >= 0].astype(np.int64)
    return members, math.prod(geo.ksize)


def _window_kind(check, name, right, engine, members, ksize) -> str | None:
    if check.same(right, engine):
        return "right"
    hit = np.flatnonzero(engine)
    if name.startswith("max"):
        if len(members) > 1 and np.array_equal(np.sort(hit), np.sort(members)):
            values = engine[hit]
            return "whole-window" if np.allclose(values, values[0]) else None
        aim = np.flatnonzero(right)
        if len(hit) == 1 and len(aim) == 1 and hit[0] in members and hit[0] != aim[0]:
            return "wrong-position" if check.same(right[aim], engine[hit]) else None
        return None
    n = len(members)
    if n < ksize and np.array_equal(hit, np.flatnonzero(right)):
        return "full-window" if check.same(right[hit] * n / ksize, engine[hit]) else None
    return None


def _whole_window(k, right, engine, members, ksize, shape) -> Finding:
    n, value = len(members), float(engine[members[0]])
    how = "averaged over" if math.isclose(value * n, 1) else f"{value:.4g} to each of"
    return Finding(
        "whole-window",
        "gives each window's gradient to the whole window, not to its maximum: a spike in g "
        f"at output {k} goes {how} the {n} elements of its window, as an average pool's would",
        "send each window's gradient to the window's maximum only (its first maximum on a "
        "tie): `g * (window == window.max())`, added where windows overlap",
    )


def _wrong_position(k, right, engine, members, ksize, shape) -> Finding:
    at, aim = (_place(np.flatnonzero(v)[0], shape) for v in (engine, right))
    return Finding(
        "wrong-position",
        "sends each window's gradient to another element of the window than its maximum: a "
        f"spike in g at output {k} lands on x{at}, where the window's maximum is x{aim}",
        "send it to the window's maximum: unravel the argmax in the window's own shape and "
        "add the window's start (output index times the stride, minus the pad)",
    )


def _place(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(int(flat), shape)]


def _full_window(k, right, engine, members, ksize, shape) -> Finding:
    n = len(members)
    return Finding(
        "scaled",
        f"divides by the full window ({ksize}) at the padded border, where SAME averages "
        f"over the in-bounds elements only: at output {k} the window holds {n}, so its "
        f"gradient is {n}/{ksize} of the right one",
        "divide each window's gradient by the number of its in-bounds elements (the pads "
        "are not counted)",
        region="at the padded border",
    )


_POOL_FINDINGS = {
    "whole-window": _whole_window,
    "wrong-position": _wrong_position,
    "full-window": _full_window,
}


# -- roll ---------------------------------------------------------------------------------


def rolled(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """roll's gradient rolled by the wrong shift: where a spike at the origin lands."""
    check = prober.check
    if check.node.op.name != "roll" or want.shape != got.shape or check.same(want, got):
        return None  # (a shift of half an axis is its own inverse: right either way)
    attrs = check.node.attrs
    shift, axis = attrs["shift"], attrs["axis"]
    if check.same(np.roll(check.cotangent, shift, axis), got):
        return Finding(
            "shifted",
            f"rolls g by the forward shift {shift}, where roll's VJP rolls it back by "
            f"{np.negative(shift).tolist()}: the shift is not inverted",
            "roll the gradient back: np.roll(g, np.negative(shift), axis)",
        )
    origin = (0,) * want.ndim
    aim, hit = right_spike(check, arg, origin), engine_spike(check, arg, origin)
    if np.count_nonzero(aim) != 1 or np.count_nonzero(hit) != 1:
        return None
    p, q = np.argwhere(aim)[0], np.argwhere(hit)[0]
    offset = tuple(int(d) for d in (q - p) % np.array(want.shape))
    if not check.same(np.roll(want, offset, tuple(range(want.ndim))), got):
        return None
    return Finding(
        "shifted",
        f"is the right VJP rolled by {list(offset)}: a spike in g at {origin} lands at "
        f"{tuple(int(i) for i in q)}, where {tuple(int(i) for i in p)} is right",
        "roll the gradient back by minus the forward shift: np.roll(g, np.negative(shift), axis)",
    )


# -- cumulative ops -----------------------------------------------------------------------


def not_reversed(prober: Prober, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
    """cumsum's (cumprod's) gradient accumulated from the wrong end along its axis."""
    check = prober.check
    name = check.node.op.name
    if name not in ("cumsum", "cumprod") or want.shape != got.shape or not want.ndim:
        return None
    axis = check.node.attrs["axis"] % want.ndim
    evidence = None
    for j in range(want.shape[axis]):
        index = tuple(j if a == axis else 0 for a in range(want.ndim))
        line = tuple(slice(None) if a == axis else 0 for a in range(want.ndim))
        aim, hit = right_spike(check, arg, index), engine_spike(check, arg, index)
        if np.count_nonzero(hit) != np.count_nonzero(hit[line]):
            return None  # the spike left its line: not a matter of direction
        reach, right = np.flatnonzero(hit[line]), np.flatnonzero(aim[line])
        if check.same(aim, hit):
            continue
        side = _opposite(reach, right, j)
        if side is None:
            return None
        if side and evidence is None:  # reached past j on the wrong side: seen reversed
            evidence = (j, reach.tolist(), right.tolist())
    if evidence is None:
        return None
    j, reach, right = evidence
    # cumsum's VJP with the direction reversed is the VJP of g reversed, reversed back.
    exact = name == "cumsum" and check.same(
        np.flip(check.right(np.flip(check.cotangent, axis)).grads[f"a{arg}"], axis), got
    )
    summed = "g" if name == "cumsum" else "g * y"
    return Finding(
        "not-reversed",
        f"accumulates g along axis {axis} from the wrong end: a spike in g at position {j} "
        f"reaches positions {reach}, where the right VJP reaches {right} ({name}'s VJP runs "
        f"the cumulative sum of {summed} the other way)",
        f"accumulate {summed} from the other end: cumsum({summed}, axis, "
        "exclusive=exclusive, reverse=not reverse)" + ("" if name == "cumsum" else " / x"),
        "exact" if exact else "likely",
    )


def _opposite(reach: np.ndarray, right: np.ndarray, j: int) -> bool | None:
    """Whether the engine's reach lies on the other side of position j from the right one
    (None: it does not), and strictly past j (True) or only at it (False)."""
    if (reach >= j).all() and (right <= j).all():
        return bool((reach > j).any())
    if (reach <= j).all() and (right >= j).all():
        return bool((reach < j).any())
    return None
