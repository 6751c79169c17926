"""A case for each fault of the windowed and indexed ops (catalogue/windows.py and
catalogue/indexing.py), merged into test_faults.py's FAULT_CASES.

Most of these faults change nothing unless the case has what they get wrong, which is
also what keeps them apart from one another on a shared op:

* conv1d and conv2d: stride-not-dilated needs strides > 1; crop-from-start a pad
  before; same-pad-before an odd SAME total (an even kernel at stride 1), where the pad
  before is 0 so that crop-from-start changes nothing; groups-interleaved groups with
  more than one channel each; filter-reshaped an OIW/OIHW filter. kernel-not-flipped's
  case has none of these, so it is the only fault of its op that changes it.
* max_pool1d and max_pool2d: all-maxima only shows at tied maxima, so its input is a
  literal with ties in windows that do not overlap (where overlap-assigned changes
  nothing); overlap-assigned's windows overlap (strides < ksize) on random values.
* avg_pool1d's and avg_pool2d's full-window only shows where SAME pads a window: an odd
  total pad.
* take/take_along_axis overwrite only where an index repeats; prod's and cumprod's
  divides-by-x only at a zero (cumprod's case is judged by finite differences:
  TensorFlow's own rule is this fault).
"""

from __future__ import annotations


def normal(*shape: int) -> dict:
    return {"shape": list(shape)}


def ints(values: list) -> dict:
    return {"values": values, "dtype": "int64"}


WINDOW_CASES: dict[str, dict] = {
    "conv2d.kernel-not-flipped": {
        "expr": "conv2d(x, w)",
        "inputs": {"x": normal(1, 4, 4, 2), "w": normal(3, 3, 2, 2)},
    },
    "conv2d.stride-not-dilated": {
        "expr": "conv2d(x, w, strides=2)",
        "inputs": {"x": normal(1, 5, 5, 2), "w": normal(3, 3, 2, 2)},
    },
    "conv2d.crop-from-start": {
        "expr": "conv2d(x, w, padding=1)",
        "inputs": {"x": normal(1, 4, 4, 2), "w": normal(3, 3, 2, 2)},
    },
    "conv2d.same-pad-before": {
        "expr": "conv2d(x, w, padding='SAME')",
        "inputs": {"x": normal(1, 4, 4, 2), "w": normal(2, 2, 2, 2)},
    },
    "conv2d.groups-interleaved": {
        "expr": "conv2d(x, w, groups=2)",
        "inputs": {"x": normal(1, 4, 4, 4), "w": normal(3, 3, 2, 2)},
    },
    "conv2d.filter-reshaped": {
        "expr": "conv2d(x, w, filter_format='OIHW')",
        "inputs": {"x": normal(1, 4, 4, 2), "w": normal(3, 2, 2, 2)},
    },
    "conv1d.kernel-not-flipped": {
        "expr": "conv1d(x, w)",
        "inputs": {"x": normal(1, 6, 2), "w": normal(3, 2, 2)},
    },
    "conv1d.stride-not-dilated": {
        "expr": "conv1d(x, w, strides=2)",
        "inputs": {"x": normal(1, 7, 2), "w": normal(3, 2, 2)},
    },
    "conv1d.crop-from-start": {
        "expr": "conv1d(x, w, padding=1)",
        "inputs": {"x": normal(1, 5, 2), "w": normal(3, 2, 2)},
    },
    "conv1d.same-pad-before": {
        "expr": "conv1d(x, w, padding='SAME')",
        "inputs": {"x": normal(1, 5, 2), "w": normal(2, 2, 2)},
    },
    "conv1d.groups-interleaved": {
        "expr": "conv1d(x, w, groups=2)",
        "inputs": {"x": normal(1, 6, 4), "w": normal(3, 2, 2)},
    },
    "conv1d.filter-reshaped": {
        "expr": "conv1d(x, w, filter_format='OIW')",
        "inputs": {"x": normal(1, 5, 2), "w": normal(3, 2, 2)},
    },
    "conv2d_transpose.same-pad-before": {
        "expr": "conv2d_transpose(x, w, output_shape=[1, 4, 4, 2], strides=1)",
        "inputs": {"x": normal(1, 4, 4, 3), "w": normal(2, 2, 2, 3)},
    },
    "max_pool2d.all-maxima": {
        "expr": "max_pool2d(x, ksize=2)",
        "inputs": {"x": [[[[1.0], [1.0], [0.0], [2.0]], [[0.5], [1.0], [2.0], [2.0]]]]},
    },
    "max_pool2d.overlap-assigned": {
        "expr": "max_pool2d(x, ksize=3, strides=1)",
        "inputs": {"x": normal(1, 5, 5, 1)},
    },
    "avg_pool2d.full-window": {
        "expr": "avg_pool2d(x, ksize=3, strides=2, padding='SAME')",
        "inputs": {"x": normal(1, 4, 4, 1)},
    },
    "max_pool1d.all-maxima": {
        "expr": "max_pool1d(x, ksize=2)",
        "inputs": {"x": [[[1.0], [1.0], [0.5], [2.0], [2.0], [0.0]]]},
    },
    "max_pool1d.overlap-assigned": {
        "expr": "max_pool1d(x, ksize=3, strides=1)",
        "inputs": {"x": normal(1, 7, 1)},
    },
    "avg_pool1d.full-window": {
        "expr": "avg_pool1d(x, ksize=3, strides=2, padding='SAME')",
        "inputs": {"x": normal(1, 4, 1)},
    },
    "take.overwrite": {
        "expr": "take(x, i)",
        "inputs": {"x": normal(4, 3), "i": ints([0, 2, 0, 3])},
    },
    "take_along_axis.overwrite": {
        "expr": "take_along_axis(x, i, axis=1)",
        "inputs": {"x": normal(2, 4), "i": ints([[0, 0, 2], [1, 3, 1]])},
    },
    "prod.divides-by-x": {
        "expr": "prod(x, axis=1)",
        "inputs": {"x": [[1.5, 0.0, 2.0], [0.5, -1.0, 3.0]]},
    },
    "cumsum.not-reversed": {"expr": "cumsum(x, axis=1)", "inputs": {"x": normal(2, 4)}},
    "cumprod.divides-by-x": {
        "expr": "cumprod(x, axis=1)",
        "inputs": {"x": [[2.0, 0.0, 3.0, 4.0], [1.5, -1.0, 0.5, 2.0]]},
        "reference": "numeric",
    },
    "flip.not-flipped": {"expr": "flip(x, 1)", "inputs": {"x": normal(2, 3)}},
    "roll.not-inverted": {"expr": "roll(x, 1, axis=1)", "inputs": {"x": normal(2, 4)}},
}
