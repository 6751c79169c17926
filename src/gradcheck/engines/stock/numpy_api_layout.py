"""The layout ops (SPEC §3.1: pad, tile, repeat, roll, dilate, undilate) the NumPy way, for
the adapters whose module mirrors NumPy's (`NumpyApiOps`' mixin): JAX computes them with
its own ``pad``, ``tile``, ``repeat`` and ``roll``; HIPS autograd, whose ``pad`` VJP knows
only the constant mode and whose ``repeat`` takes no list, with `pad_by_concat` and
`repeat_by_index` (`AutogradEngine`). dilate by reshape and concatenate, undilate by slices.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _axes(axes: Any) -> list[int]:
    return [axes] if isinstance(axes, int) else list(axes)


class NumpyApiLayoutOps:
    xp: Any

    def pad(self, x, paddings, mode="constant", constant_values=0):
        if not paddings:  # a scalar
            return x
        if mode == "constant":
            return self.xp.pad(x, paddings, mode="constant", constant_values=constant_values)
        return self.xp.pad(x, paddings, mode=mode)

    def tile(self, x, reps):
        return self.xp.tile(x, tuple(reps))

    def repeat(self, x, repeats, axis=None):
        return self.xp.repeat(x, np.asarray(repeats) if isinstance(repeats, list) else repeats,
                              axis=axis)  # fmt: skip

    def roll(self, x, shift, axis=None):
        # Lists as arrays: autograd's roll VJP negates the shift.
        shift = np.asarray(shift) if isinstance(shift, list) else shift
        return self.xp.roll(x, shift, axis=tuple(axis) if isinstance(axis, list) else axis)

    def dilate(self, x, axes, dilation):
        xp = self.xp
        for a in sorted(a % xp.ndim(x) for a in _axes(axes)):
            shape = list(xp.shape(x))
            split = xp.reshape(x, [*shape[: a + 1], 1, *shape[a + 1 :]])
            zeros = xp.zeros([*shape[: a + 1], dilation, *shape[a + 1 :]], dtype=x.dtype)
            joined = xp.concatenate([split, zeros], axis=a + 1)
            x = xp.reshape(joined, [*shape[:a], shape[a] * (dilation + 1), *shape[a + 1 :]])
        return x

    def undilate(self, x, axes, dilation):
        index = [slice(None)] * self.xp.ndim(x)
        for a in _axes(axes):
            index[a] = slice(None, None, dilation + 1)
        return x[tuple(index)]

    # -- for an engine whose module has no usable pad or list repeat (HIPS autograd) ------
    def pad_by_concat(self, x, paddings, mode="constant", constant_values=0):
        """pad from gathers and concatenation, whose VJPs every such engine has."""
        xp = self.xp
        edge = {"reflect": 1, "symmetric": 0}.get(mode)
        for axis, (before, after) in enumerate(paddings):
            shape, at = list(xp.shape(x)), (slice(None),) * axis
            n = shape[axis]
            if edge is None:
                blocks = [np.full([*shape[:axis], k, *shape[axis + 1 :]], constant_values, x.dtype)
                          for k in (before, after)]  # fmt: skip
            else:  # the mirror images, gathered back to front
                blocks = [
                    x[(*at, np.arange(before - 1 + edge, edge - 1, -1))],
                    x[(*at, np.arange(n - 1 - edge, n - 1 - edge - after, -1))],
                ]
            x = xp.concatenate([blocks[0], x, blocks[1]], axis=axis)
        return x

    def repeat_by_index(self, x, repeats, axis=None):
        """repeat as a gather by NumPy's own repeated indices: its VJP adds the copies."""
        if axis is None:
            x, axis = self.xp.reshape(x, [-1]), 0
        at = axis % self.xp.ndim(x)
        sources = np.repeat(np.arange(self.xp.shape(x)[at]), repeats)
        return x[(slice(None),) * at + (sources,)]
