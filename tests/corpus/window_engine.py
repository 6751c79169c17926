"""The tape engine with the windowed and indexed ops (SPEC §3.1): the corpus's correct
engine for the catalogue's faults of conv1d, conv2d, conv2d_transpose, the max and
average pools, take, take_along_axis, prod, cumsum, cumprod, flip and roll.

These ops' values and VJPs are gradcheck's own (`gradcheck.ops`), called on the tape's
NumPy values: what this engine adds to the corpus is its bugs, `window_bugs.py`, each a
`_vjp_<op>` written as an engine had it. A gather's integer indices are an attribute of
its tape entry, never an input that receives a gradient.

    gradcheck run cases/conv.yaml --engine tests/corpus/window_engine.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# gradcheck loads this file by path: make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from tape_engine import Engine as TapeEngine
from tape_engine import Shares, Var

from gradcheck.ops import get_op


def _forward(op: str):
    """The engine's method for `op`: its value, recorded on the tape."""

    def method(self: Engine, *args: Var, **attrs: Any) -> Var:
        value = get_op(op).forward(*(a.value for a in args), **attrs)
        return self._record(op, args, value, **attrs)

    method.__name__ = op
    return method


def _backward(op: str):
    """`_vjp_<op>`: gradcheck's rules, one share per input."""

    def vjp(self: Engine, g, out, *args, **attrs) -> Shares:
        return tuple(rule(g, out, *args, **attrs) for rule in get_op(op).vjps)

    vjp.__name__ = f"_vjp_{op}"
    return vjp


def _gather(op: str):
    """take's or take_along_axis's method: the indices an attribute, not an input."""

    def method(self: Engine, x: Var, indices: Var, axis: int) -> Var:
        value = get_op(op).forward(x.value, indices.value, axis=axis)
        return self._record(op, [x], value, indices=indices.value, axis=axis)

    method.__name__ = op
    return method


def _gather_backward(op: str):
    def vjp(self: Engine, g, out, x, *, indices, axis) -> Shares:
        return (get_op(op).vjps[0](g, out, x, indices, axis=axis),)

    vjp.__name__ = f"_vjp_{op}"
    return vjp


class Engine(TapeEngine):
    """The tape engine, with the windowed and indexed ops of gradcheck's registry."""

    name = "window"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = f"window/{cls.__name__}"  # a planted bug shows up under its own name

    conv1d, _vjp_conv1d = _forward("conv1d"), _backward("conv1d")
    conv2d, _vjp_conv2d = _forward("conv2d"), _backward("conv2d")
    conv2d_transpose = _forward("conv2d_transpose")
    _vjp_conv2d_transpose = _backward("conv2d_transpose")
    max_pool1d, _vjp_max_pool1d = _forward("max_pool1d"), _backward("max_pool1d")
    max_pool2d, _vjp_max_pool2d = _forward("max_pool2d"), _backward("max_pool2d")
    avg_pool1d, _vjp_avg_pool1d = _forward("avg_pool1d"), _backward("avg_pool1d")
    avg_pool2d, _vjp_avg_pool2d = _forward("avg_pool2d"), _backward("avg_pool2d")
    prod, _vjp_prod = _forward("prod"), _backward("prod")
    cumsum, _vjp_cumsum = _forward("cumsum"), _backward("cumsum")
    cumprod, _vjp_cumprod = _forward("cumprod"), _backward("cumprod")
    flip, _vjp_flip = _forward("flip"), _backward("flip")
    roll, _vjp_roll = _forward("roll"), _backward("roll")
    take, _vjp_take = _gather("take"), _gather_backward("take")
    take_along_axis = _gather("take_along_axis")
    _vjp_take_along_axis = _gather_backward("take_along_axis")
