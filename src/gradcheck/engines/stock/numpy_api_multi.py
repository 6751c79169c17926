"""The NumPy-API adapters' (jax, autograd) ops with several outputs (SPEC §3.1): split,
unstack and slogdet, each computed with the adapter's module `xp`."""

from __future__ import annotations

from typing import Any


def piece_sizes(length: int, num_or_sizes: Any) -> list[int]:
    """tf.split's pieces along an axis of `length`: a count of equal ones, or the sizes
    given (one -1 is what the others leave)."""
    if isinstance(num_or_sizes, int):
        return [length // num_or_sizes] * num_or_sizes
    sizes = list(num_or_sizes)
    if -1 in sizes:
        sizes[sizes.index(-1)] = length - (sum(sizes) + 1)
    return sizes


class NumpyApiMultiOps:
    xp: Any  # the engine's NumPy-compatible module

    def split(self, x, num_or_sizes=None, axis=0):
        # NumPy's split takes where the pieces start (but for the first), not their sizes.
        sizes = piece_sizes(x.shape[axis], num_or_sizes)
        starts = [sum(sizes[:k]) for k in range(1, len(sizes))]
        pieces = self.xp.split(x, starts, axis=axis)  # autograd: a SequenceBox, not a list
        return [pieces[k] for k in range(len(sizes))]

    def unstack(self, x, axis=0):
        moved = self.xp.moveaxis(x, axis, 0)
        return [moved[k] for k in range(x.shape[axis])]

    def slogdet(self, x):
        sign, logabsdet = self.xp.linalg.slogdet(x)
        return sign, logabsdet
