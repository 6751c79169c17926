"""``--engine torch``'s layout ops (SPEC §3.1): pad, tile, repeat, roll, dilate, undilate,
with PyTorch's own functions (a mixin of `TorchEngine`).

``F.pad`` takes its pairs last axis first, and its 'reflect' mode only on the last one to
three axes of a batched input; it has no 'symmetric' at all: the mirrored modes are built
axis by axis from ``torch.flip`` and ``torch.cat``, what ``F.pad`` does inside.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _mirror(x: torch.Tensor, axis: int, before: int, after: int, edge: int) -> torch.Tensor:
    """x padded along `axis` by its mirror image: `edge` 1 leaves the edge element out
    (reflect), 0 repeats it (symmetric)."""
    n = x.shape[axis]
    parts = [x]
    if before:
        parts.insert(0, torch.flip(x.narrow(axis, edge, before), [axis]))
    if after:
        parts.append(torch.flip(x.narrow(axis, n - edge - after, after), [axis]))
    return torch.cat(parts, dim=axis) if len(parts) > 1 else x


class TorchLayoutOps:
    def pad(self, x, paddings, mode="constant", constant_values=0):
        if mode == "constant":
            flat = [p for pair in reversed(paddings) for p in pair]  # F.pad: last axis first
            return F.pad(x, flat, value=float(constant_values)) if flat else x
        for axis, (before, after) in enumerate(paddings):
            x = _mirror(x, axis, before, after, 1 if mode == "reflect" else 0)
        return x

    def tile(self, x, reps):
        return torch.tile(x, tuple(reps))

    def repeat(self, x, repeats, axis=None):
        counts = torch.as_tensor(repeats) if isinstance(repeats, list) else repeats
        if axis is None:  # NumPy's and TensorFlow's: x flattened first
            return torch.repeat_interleave(x.reshape(-1), counts)
        return torch.repeat_interleave(x, counts, dim=axis)

    def roll(self, x, shift, axis=None):
        if axis is None:  # torch.roll without dims flattens and restores the shape, as NumPy
            return torch.roll(x, shift)
        return torch.roll(x, shift, axis if isinstance(axis, int) else tuple(axis))

    def dilate(self, x, axes, dilation):
        out_shape = list(x.shape)
        index = [slice(None)] * x.ndim
        for a in [axes] if isinstance(axes, int) else axes:
            out_shape[a] *= dilation + 1
            index[a] = slice(None, None, dilation + 1)
        out = x.new_zeros(out_shape)
        out[tuple(index)] = x  # an in-place write autograd records: its adjoint is the slice
        return out

    def undilate(self, x, axes, dilation):
        index = [slice(None)] * x.ndim
        for a in [axes] if isinstance(axes, int) else axes:
            index[a] = slice(None, None, dilation + 1)
        return x[tuple(index)]
