"""Faults of the ops that move elements: permutations not inverted, shapes not restored."""

from __future__ import annotations

import numpy as np

from ..rules import Fault, concat_first_axis

# fmt: off
FAULTS: tuple[Fault, ...] = (
    Fault(
        "transpose.perm-not-inverted",
        "transpose's VJP applies perm again instead of its inverse",
        "transpose the gradient by the inverse permutation: `np.transpose(g, np.argsort(perm))`",
        vjps={
            ("transpose", 0): lambda g, ans, x, perm: np.transpose(
                g, None if perm is None else perm
            )
        },
    ),
    Fault(
        "reshape.no-reshape",
        "reshape's VJP returns the gradient in the output's shape: it is never reshaped back "
        "to the input's",
        "reshape the gradient back: `g.reshape(x.shape)`",
        vjps={("reshape", 0): lambda g, ans, x, shape: g},
        seen="wvabrinskas/Neuron#177",
    ),
    Fault(
        "getitem.slice-shape",
        "getitem's VJP returns the gradient at the slice's shape instead of scattering it "
        "into zeros of the input's shape",
        "scatter it: `z = np.zeros_like(x); z[index] = g`",
        vjps={("getitem", 0): lambda g, ans, x, index: g},
        seen="joelgrus/autograd#2",
    ),
    Fault(
        "concat.first-axis",
        "concat's VJP splits the gradient along axis 0 whatever axis the values were joined on",
        "split along the concat axis: `np.split(g, offsets, axis)[i]`",
        vjps={("concat", 0): concat_first_axis},
        seen="improbable-research/keanu#279",
    ),
)
# fmt: on
