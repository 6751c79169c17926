"""What a heatmap draws of an array: 2-D slices, chosen and downsampled, honestly.

A rank > 2 array is shown as 2-D slices over its leading axes, at most MAX_SLICES of
them: those with the most mismatched elements, in index order. A slice with more than
its share of CELL_BUDGET cells on an axis is downsampled into blocks, and a block
shows its element of largest |difference| (the same element in every panel, so the
panels still subtract): an isolated wrong element stays visible, which averaging
would hide. `notes` says in words when either happens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .markup import shape

MAX_SLICES = 4  # 2-D slices drawn of an array of rank > 2
MAX_CELLS = 32  # cells per axis of a slice; more elements are shown as blocks
CELL_BUDGET = 1024  # cells of one panel over all its slices: fewer per axis when many
MIN_CELLS = 8  # cells per axis however many slices share the budget


@dataclass
class Slice:
    """One 2-D slice as drawn: a value per cell and panel, blocks already picked."""

    label: str  # the leading index, "[1, 0]", or "" for rank <= 2
    values: list[np.ndarray]  # per panel, (rows, cols), float64
    where: np.ndarray  # (rows, cols, rank): the index of the element each cell shows
    bad: np.ndarray  # (rows, cols): how many elements of the cell's block mismatch
    block: tuple[int, int]  # elements per cell along the slice's two axes


def slices(key: np.ndarray, panels: list[np.ndarray], bad: np.ndarray | None) -> list[Slice]:
    """The slices to draw of arrays shaped like `key`, whose magnitude picks the element
    a block shows; `bad` is the mismatch mask, None when there is none."""
    keys = _as_slices(np.where(np.isnan(key), np.inf, np.abs(key)))
    values = [_as_slices(p) for p in panels]
    marks = _as_slices(bad) if bad is not None else np.zeros(keys.shape, dtype=bool)
    leading = key.shape[:-2]
    rows, cols = keys.shape[1:]
    chosen = _chosen(marks)
    per_axis = max(MIN_CELLS, min(MAX_CELLS, math.isqrt(CELL_BUDGET // len(chosen))))
    block = (math.ceil(rows / per_axis), math.ceil(cols / per_axis))
    out = []
    for i in chosen:
        r, c = _block_argmax(keys[i], block)
        lead = [int(j) for j in np.unravel_index(i, leading)] if leading else []
        index = [np.full(r.shape, j) for j in lead] + [r, c][2 - min(key.ndim, 2) :]
        out.append(
            Slice(
                label=index_text(lead),
                values=[v[i][r, c] for v in values],
                where=np.stack(index, -1) if index else np.zeros((*r.shape, 0), dtype=int),
                bad=_block_sum(marks[i], block),
                block=block,
            )
        )
    return out


def notes(drawn: list[Slice], dims: tuple[int, ...]) -> list[str]:
    """What the slices leave out, in words."""
    out = []
    leading = dims[:-2]
    if len(dims) > 2 and math.prod(leading) > len(drawn):
        out.append(
            f"Showing {len(drawn)} of {math.prod(leading)} slices over the leading axes "
            f"{shape(leading)}: those with the most mismatched elements."
        )
    block = drawn[0].block
    if block != (1, 1):
        out.append(
            f"Downsampled: each cell is a block of up to {block[0]}x{block[1]} elements and "
            "shows the one whose |difference| is largest; a block is outlined when any of "
            "its elements is mismatched."
        )
    return out


def index_text(index: list[int]) -> str:
    return "[" + ", ".join(map(str, index)) + "]" if index else ""


def _as_slices(array: np.ndarray) -> np.ndarray:
    """(slices, rows, cols): rank 0 is 1x1, rank 1 a row, rank > 2 its leading axes flat."""
    if array.ndim <= 2:
        return array.reshape((1,) * (3 - array.ndim) + array.shape)
    return array.reshape((-1, *array.shape[-2:]))


def _chosen(bad: np.ndarray) -> list[int]:
    """At most MAX_SLICES slices, those with the most mismatches, in index order."""
    if len(bad) <= MAX_SLICES:
        return list(range(len(bad)))
    counts = bad.reshape(len(bad), -1).sum(axis=1)
    return sorted(int(i) for i in np.argsort(-counts, kind="stable")[:MAX_SLICES])


def _blocked(array: np.ndarray, block: tuple[int, int], fill: float) -> np.ndarray:
    """(block rows, block cols, elements per block), the ragged edge padded with `fill`."""
    br, bc = block
    rows, cols = math.ceil(array.shape[0] / br), math.ceil(array.shape[1] / bc)
    padded = np.full((rows * br, cols * bc), fill, dtype=array.dtype)
    padded[: array.shape[0], : array.shape[1]] = array
    return padded.reshape(rows, br, cols, bc).transpose(0, 2, 1, 3).reshape(rows, cols, -1)


def _block_argmax(key: np.ndarray, block: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per block, the row and column (in the slice) of its largest key."""
    pick = _blocked(key, block, -1.0).argmax(axis=-1)
    rows, cols = np.indices(pick.shape)
    return rows * block[0] + pick // block[1], cols * block[1] + pick % block[1]


def _block_sum(bad: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    return _blocked(bad.astype(np.int64), block, 0).sum(axis=-1)
