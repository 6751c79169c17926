"""An adapter for mygrad (a real engine gradcheck did not write), with its conventions.

mygrad is a tape-style reverse mode over NumPy: `mygrad.tensor` values, `backward(g)`.
Its VJPs are correct, but at kinks and ties it chooses otherwise than TensorFlow, and
this adapter declares what it chooses (each probed, see tests/test_conventions.py):
a maximum/minimum tie gets a gradient on neither side (mygrad's 0/0: not a valid
subgradient), a max/min reduction gives a tie's gradient to the first tied element,
and pow's exponent gets NaN where the base is negative. No logsumexp (mygrad has
none), and no float16/bfloat16 (mygrad refuses bfloat16 arrays).

    gradcheck run cases/ --engine tests/real_engines/mygrad_engine.py
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import mygrad as mg
import numpy as np
from mygrad import nnet

DTYPES = (np.float32, np.float64)


def _axis(axis: object) -> object:
    return tuple(axis) if isinstance(axis, list) else axis


class Engine:
    name = "mygrad"
    conventions: ClassVar[dict[str, str]] = {
        "maximum": "none",
        "minimum": "none",
        "max": "first",
        "min": "first",
        "pow": "nan",
    }

    def leaf(self, name: str, value: np.ndarray) -> mg.Tensor:
        if value.dtype.type not in DTYPES:
            raise NotImplementedError(f"mygrad computes in float32/float64, not {value.dtype}")
        return mg.tensor(value)

    def constant(self, value: np.ndarray) -> mg.Tensor:
        return mg.tensor(value, constant=True)

    def value(self, node: mg.Tensor) -> np.ndarray:
        return node.data

    def grad(self, output: mg.Tensor, wrt: Sequence[mg.Tensor], cotangent: np.ndarray) -> list:
        output.backward(cotangent)
        return [np.zeros_like(t.data) if t.grad is None else t.grad for t in wrt]

    # -- ops, as mygrad spells them -------------------------------------------------------
    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        return a / b

    def pow(self, a, b):
        return a**b

    def maximum(self, a, b):
        return mg.maximum(a, b)

    def minimum(self, a, b):
        return mg.minimum(a, b)

    def neg(self, x):
        return -x

    def exp(self, x):
        return mg.exp(x)

    def log(self, x):
        return mg.log(x)

    def sqrt(self, x):
        return mg.sqrt(x)

    def abs(self, x):
        return mg.absolute(x)

    def square(self, x):
        return mg.square(x)

    def sin(self, x):
        return mg.sin(x)

    def cos(self, x):
        return mg.cos(x)

    def tanh(self, x):
        return mg.tanh(x)

    def sigmoid(self, x):
        return nnet.sigmoid(x)

    def relu(self, x):
        return nnet.relu(x)

    def matmul(self, a, b):
        return mg.matmul(a, b)

    def sum(self, x, axis=None, keepdims=False):
        return mg.sum(x, axis=_axis(axis), keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return mg.mean(x, axis=_axis(axis), keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return mg.max(x, axis=_axis(axis), keepdims=keepdims)

    def min(self, x, axis=None, keepdims=False):
        return mg.min(x, axis=_axis(axis), keepdims=keepdims)

    def reshape(self, x, shape):
        return mg.reshape(x, tuple(shape))

    def transpose(self, x, perm=None):
        return mg.transpose(x, None if perm is None else tuple(perm))

    def matrix_transpose(self, x):
        return mg.swapaxes(x, -1, -2)

    def expand_dims(self, x, axis=0):
        return mg.expand_dims(x, axis)

    def squeeze(self, x, axis=None):
        return mg.squeeze(x, None if axis in (None, []) else _axis(axis))

    def broadcast_to(self, x, shape):
        return mg.broadcast_to(x, tuple(shape))

    def concat(self, values, axis=0):
        return mg.concatenate(values, axis=axis)

    def stack(self, values, axis=0):
        return mg.stack(values, axis=axis)

    def getitem(self, x, index):
        return x[index]

    def softmax(self, x, axis=-1):
        return nnet.softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return nnet.logsoftmax(x, axis=axis)
