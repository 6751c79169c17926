"""Correct engines that follow other subgradient conventions than TensorFlow (SPEC §4).

Each declares the conventions it follows knowingly (`conventions = {...}`), so
gradcheck holds it to TensorFlow's answer corrected by them: it passes every case,
with a `convention` note where a declaration mattered. Its `Undeclared` twin is the
same engine without the declaration: it fails the kink and tie cases, each with the
`kink` mechanism that names what it does.

    gradcheck run tests/corpus/cases/conventions.yaml \\
        --engine tests/corpus/convention_engines.py:TapeSplit
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

import numpy as np

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import tensorflow as tf
from closure_engine import Engine as ClosureEngine
from closure_engine import Value, _axes
from tape_engine import Engine as TapeEngine
from tape_engine import Shares
from tfop_engine import Engine as TfOpEngine
from tfop_engine import Grads, Node, reduced_axes


class TapeSplit(TapeEngine):
    """maximum/minimum split a tie 0.5/0.5 (JAX, autograd), relu'(0) = 0.5, abs'(0) = 1."""

    conventions: ClassVar[dict[str, str]] = {
        "maximum": "split",
        "minimum": "split",
        "relu": "half",
        "abs": "one",
    }

    def _vjp_maximum(self, g, out, a, b) -> Shares:
        tie = a == b
        return g * np.where(tie, 0.5, a > b), g * np.where(tie, 0.5, b > a)

    def _vjp_minimum(self, g, out, a, b) -> Shares:
        tie = a == b
        return g * np.where(tie, 0.5, a < b), g * np.where(tie, 0.5, b < a)

    def _vjp_relu(self, g, out, x) -> Shares:
        return (g * np.where(x == 0, 0.5, x > 0),)

    def _vjp_abs(self, g, out, x) -> Shares:
        return (g * np.where(x >= 0, 1.0, -1.0),)


class TapeSplitUndeclared(TapeSplit):
    """TapeSplit without its declaration."""

    conventions: ClassVar[dict[str, str]] = {}


class ClosureFirst(ClosureEngine):
    """max gives a tie to the first element, min to the last (an argmax/argmin that
    scans from either end), and pow's exponent is NaN where the base is negative."""

    conventions: ClassVar[dict[str, str]] = {"max": "first", "min": "last", "pow": "nan"}

    def max(self, x: Value, axis=None, keepdims: bool = False) -> Value:
        return self._one_winner(super().max(x, axis, keepdims), x, axis, keepdims, last=False)

    def min(self, x: Value, axis=None, keepdims: bool = False) -> Value:
        return self._one_winner(super().min(x, axis, keepdims), x, axis, keepdims, last=True)

    def _one_winner(self, out: Value, x: Value, axis, keepdims: bool, *, last: bool) -> Value:
        """Keep only the first (or last) tied winner of each reduced group, in C order."""
        axes = _axes(axis, x.data.ndim)
        kept = [a for a in range(x.data.ndim) if a not in axes]
        winners = x.data == self._kept(out.data, x, axis, keepdims)
        moved = np.moveaxis(winners, kept + list(axes), range(x.data.ndim))
        flat = moved.reshape(*moved.shape[: len(kept)], -1)
        flat = flat[..., ::-1] if last else flat
        only = flat & (np.cumsum(flat, axis=-1) == 1)
        only = (only[..., ::-1] if last else only).reshape(moved.shape)
        only = np.moveaxis(only, range(x.data.ndim), kept + list(axes))
        out._backward = lambda: self._send(x, self._kept(out.grad, x, axis, keepdims) * only)
        return out

    def pow(self, a: Value, b: Value) -> Value:
        out = super().pow(a, b)

        def _backward() -> None:
            log_a = np.where(a.data == 0, 0.0, np.log(a.data))  # NaN for a negative base
            self._send(a, out.grad * b.data * a.data ** (b.data - 1))
            self._send(b, out.grad * out.data * log_a)

        out._backward = _backward
        return out


class ClosureFirstUndeclared(ClosureFirst):
    """ClosureFirst without its declaration."""

    conventions: ClassVar[dict[str, str]] = {}


class TfOpSecond(TfOpEngine):
    """maximum gives a tie to b, minimum to neither (mygrad's 0/0, not a subgradient),
    relu'(0) = 1, and max gives a tie's whole gradient to every tied element."""

    conventions: ClassVar[dict[str, str]] = {
        "maximum": "second",
        "minimum": "none",
        "relu": "one",
        "max": "all",
    }

    def _vjp_maximum(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return self._select(g, a, b, a > b)

    def _vjp_minimum(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        zeros = tf.zeros_like(g)
        return [
            self.unbroadcast(tf.where(a < b, g, zeros), a),
            self.unbroadcast(tf.where(b < a, g, zeros), b),
        ]

    def _vjp_relu(self, node: Node, g: tf.Tensor) -> Grads:
        return [tf.where(node.inputs[0] >= 0, g, tf.zeros_like(g))]

    def _vjp_max(self, node: Node, g: tf.Tensor) -> Grads:
        (x,) = node.inputs
        axis = node.attrs["axis"]
        winners = tf.cast(tf.equal(x, self._kept(node.tensor, x, axis)), g.dtype)
        assert reduced_axes(axis, x.shape.rank)  # a reduction, ties get the whole gradient
        return [winners * self._kept(g, x, axis)]


class TfOpSecondUndeclared(TfOpSecond):
    """TfOpSecond without its declaration."""

    conventions: ClassVar[dict[str, str]] = {}
