"""Faults of the ops that pick, reorder or accumulate elements: take, take_along_axis,
prod, cumsum, cumprod, flip, roll.

A gather's gradient written with NumPy's fancy assignment (`z[idx] = g`, or the buffered
`z[idx] += g`: the same thing on zeros) keeps one of a repeated index's shares instead of
their sum; prod's and cumprod's divided by x are 0 / 0 where x holds a zero; a running
sum's, a flip's or a roll's applied as the forward runs instead of inverted.
"""

from __future__ import annotations

import numpy as np

from ....ops.broadcast import expand_reduced
from ....ops.cumulative import CUMSUM
from ....ops.gathers import _along_index, _gather_index
from ....ops.layout import ROLL
from ....ops.reductions import spread
from ..rules import Fault


def _assigned(index_of):
    """A gather's VJP that assigns g at the gathered places: a repeated index keeps the
    last share only."""

    def vjp(g, ans, x, indices, axis):
        z = np.zeros(np.shape(x), np.result_type(g))
        z[index_of(indices, axis % np.ndim(x))] = g
        return z

    return vjp


def prod_over_x(g, ans, x, axis, keepdims):
    """Each factor's gradient as the product divided by the factor: NaN or inf at zeros."""
    return spread(g, x, axis, keepdims) * expand_reduced(ans, x.shape, axis, keepdims) / x


def cumprod_over_x(g, ans, x, axis, exclusive, reverse):
    """TensorFlow's cumprod rule: the backwards running sum of g * y, divided by x."""
    return CUMSUM(g * ans, axis=axis, exclusive=exclusive, reverse=not reverse) / x


# fmt: off
FAULTS: tuple[Fault, ...] = (
    Fault(
        "take.overwrite",
        "take's VJP assigns the gradient at the gathered places (`z[idx] = g` or the "
        "buffered `z[idx] += g`), so a repeated index keeps one share instead of their sum",
        "accumulate repeated indices: `np.add.at(z, (slice(None),) * axis + (indices,), g)`",
        vjps={("take", 0): _assigned(_gather_index)},
        seen="HIPS/autograd#39",
    ),
    Fault(
        "take_along_axis.overwrite",
        "take_along_axis's VJP assigns the gradient at the gathered places (`z[idx] = g`), "
        "so an index repeated along the axis keeps one share instead of their sum",
        "accumulate repeated indices: `np.add.at(z, index, g)` with take_along_axis's full "
        "index",
        vjps={("take_along_axis", 0): _assigned(_along_index)},
        seen="pytorch/pytorch#1631",
    ),
    Fault(
        "prod.divides-by-x",
        "prod's VJP divides the product by each factor (y / x), which is 0 / 0 = NaN where "
        "a factor is 0: the gradient there is the product of the other factors",
        "multiply the other factors instead of dividing: `cumprod(x, exclusive=True) * "
        "cumprod(x, exclusive=True, reverse=True)` along the reduced axes",
        vjps={("prod", 0): prod_over_x},
        seen="apache/mxnet#17864",
    ),
    Fault(
        "cumsum.not-reversed",
        "cumsum's VJP runs the upstream gradient's cumsum in the forward direction: each "
        "element's gradient is the sum of g over the outputs it reaches, from the far end",
        "run it backwards: `cumsum(g, axis, exclusive=exclusive, reverse=not reverse)`",
        vjps={("cumsum", 0): lambda g, ans, x, axis, exclusive, reverse: CUMSUM(
            g, axis=axis, exclusive=exclusive, reverse=reverse)},
        seen="pytorch/pytorch#1122",
    ),
    Fault(
        "cumprod.divides-by-x",
        "cumprod's VJP divides the backwards running sum of g * y by x, which is 0 / 0 = "
        "NaN where x holds a zero (TensorFlow's rule)",
        "at a run's first zero, use the products with that zero replaced by 1: "
        "`cumsum(g * cumprod(np.where(first, 1, x)), reverse=not reverse)` there, 0 past it",
        vjps={("cumprod", 0): cumprod_over_x},
        seen="tracel-ai/burn#3864",
    ),
    Fault(
        "flip.not-flipped",
        "flip's VJP returns the upstream gradient as it is: it must be flipped back along "
        "the same axes",
        "flip the gradient: `np.flip(g, axis)`",
        vjps={("flip", 0): lambda g, ans, x, axis: g},
        seen="deeplearning4j/deeplearning4j#8874",
    ),
    Fault(
        "roll.not-inverted",
        "roll's VJP rolls the upstream gradient by shift again instead of back by -shift",
        "roll it back: `np.roll(g, np.negative(shift), axis)`",
        vjps={("roll", 0): lambda g, ans, x, shift, axis: ROLL(g, shift=shift, axis=axis)},
        seen="apache/mxnet#15902",
    ),
)
# fmt: on
