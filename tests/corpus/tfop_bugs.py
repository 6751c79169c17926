"""Planted bugs in the TensorFlow-op engine: each class is `tfop_engine.Engine` with one
bug, in one `_vjp_<op>` method or in the backward pass's `schedule`.

`MatmulFullTranspose` and `TraversalOrder` are the two faults of the question gradcheck
grew from (/work/shared/seed), each on its own. The registry in `__init__.py` names the
case that shows each bug and the hint gradcheck should give::

    gradcheck run cases/seed.yaml --engine tests/corpus/tfop_bugs.py:MatmulFullTranspose
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import tensorflow as tf

# gradcheck loads this file by path: make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from tfop_engine import Engine as TfOpEngine
from tfop_engine import Grads, Node, reduced_axes


class MatmulFullTranspose(TfOpEngine):
    """matmul's gradient transposes with tf.transpose, which reverses every axis, where a
    batched matmul must swap only the last two (the seed question's bug)."""

    def _vjp_matmul(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return [
            self.unbroadcast(tf.matmul(g, tf.transpose(b)), a),
            self.unbroadcast(tf.matmul(tf.transpose(a), g), b),
        ]


class MatmulNoBatchReduce(TfOpEngine):
    """matmul's gradient for an operand broadcast along batch axes is not summed back."""

    def _vjp_matmul(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return [
            tf.matmul(g, tf.linalg.matrix_transpose(b)),
            tf.matmul(tf.linalg.matrix_transpose(a), g),
        ]


class TraversalOrder(TfOpEngine):
    """The backward pass walks a breadth-first queue from the output (the seed question's
    `working` list), so a node can pass its gradient on before all consumers added theirs."""

    def schedule(self, output: Node) -> Iterator[Node]:
        return _breadth_first(output)


def _breadth_first(output: Node) -> Iterator[Node]:
    """The seed question's `working` list: a node is propagated when popped, with whatever
    adjoint it has so far, and its parents queued if absent (again, if popped before)."""
    working = [output]
    while working:
        node = working.pop(0)
        yield node
        for parent in node.parents:
            if parent not in working:
                working.append(parent)


class SigmoidFromInput(TfOpEngine):
    """sigmoid's gradient is computed from the input, g * x * (1 - x), not the output."""

    def _vjp_sigmoid(self, node: Node, g: tf.Tensor) -> Grads:
        (x,) = node.inputs
        return [g * x * (1 - x)]


class ReluKink(TfOpEngine):
    """relu's gradient passes at x == 0 (relu'(0) = 1), where TensorFlow takes 0."""

    def _vjp_relu(self, node: Node, g: tf.Tensor) -> Grads:
        return [tf.where(node.inputs[0] >= 0, g, tf.zeros_like(g))]


class SqrtNoHalf(TfOpEngine):
    """sqrt's gradient is g / sqrt(x): the factor 1/2 is missing."""

    def _vjp_sqrt(self, node: Node, g: tf.Tensor) -> Grads:
        return [g / node.tensor]


class LogSoftmaxNoSoftmax(TfOpEngine):
    """log_softmax's gradient subtracts sum(g) without weighting it by softmax(x)."""

    def _vjp_log_softmax(self, node: Node, g: tf.Tensor) -> Grads:
        return [g - tf.reduce_sum(g, axis=node.attrs["axis"], keepdims=True)]


class MatmulWrongOrder(TfOpEngine):
    """Not in the catalogue: matmul's gradient for a multiplies in the wrong order,
    matrix_transpose(b) @ g instead of g @ matrix_transpose(b)."""

    def _vjp_matmul(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        _, for_b = super()._vjp_matmul(node, g)
        return [self.unbroadcast(tf.matmul(tf.linalg.matrix_transpose(b), g), a), for_b]


class ExpIgnoresUpstream(TfOpEngine):
    """Not in the catalogue: exp's gradient is exp(x) alone; the upstream g is dropped."""

    def _vjp_exp(self, node: Node, g: tf.Tensor) -> Grads:
        return [node.tensor]


# -- catalogue faults added with the mechanism probes ----------------------------------


class MaxMaskOnly(TfOpEngine):
    """max/min's gradient is the tie-split winner mask alone: g is never multiplied in."""

    def _vjp_max(self, node: Node, g: tf.Tensor) -> Grads:
        (x,) = node.inputs
        axis = node.attrs["axis"]
        winners = tf.cast(tf.equal(x, self._kept(node.tensor, x, axis)), g.dtype)
        ties = tf.reduce_sum(winners, axis=reduced_axes(axis, x.shape.rank), keepdims=True)
        return [winners / ties]


class LogSoftmaxDotOutput(TfOpEngine):
    """log_softmax's gradient subtracts sum(g * y), softmax's form applied to the
    log-probabilities, instead of softmax(x) * sum(g)."""

    def _vjp_log_softmax(self, node: Node, g: tf.Tensor) -> Grads:
        axis = node.attrs["axis"]
        return [g - tf.reduce_sum(g * node.tensor, axis=axis, keepdims=True)]


class ReshapeNotReshaped(TfOpEngine):
    """reshape's gradient (also expand_dims' and squeeze's here) stays in the output's
    shape: it is never reshaped back."""

    def _vjp_reshape(self, node: Node, g: tf.Tensor) -> Grads:
        return [g]


class MatmulUntransposed(TfOpEngine):
    """matmul's gradients multiply by the other operand untransposed, g @ b and a @ g."""

    def _vjp_matmul(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return [self.unbroadcast(tf.matmul(g, b), a), self.unbroadcast(tf.matmul(a, g), b)]


# -- mechanisms (SPEC §6.1): bugs the catalogue does not know ------------------------


class ExpClipsGradient(TfOpEngine):
    """exp's gradient clips the upstream g to [-1, 1] first: not linear in g."""

    def _vjp_exp(self, node: Node, g: tf.Tensor) -> Grads:
        return [tf.clip_by_value(g, -1.0, 1.0) * node.tensor]


class SqrtPassesGradient(TfOpEngine):
    """sqrt's gradient is g itself: the factor 0.5 / sqrt(x) is forgotten."""

    def _vjp_sqrt(self, node: Node, g: tf.Tensor) -> Grads:
        return [g]


class TanhStopped(TfOpEngine):
    """tanh's gradient is zero, as if its input went through tf.stop_gradient."""

    def _vjp_tanh(self, node: Node, g: tf.Tensor) -> Grads:
        return [tf.zeros_like(g)]


class SquareNoTwo(TfOpEngine):
    """square's gradient is g * x: the factor 2 is missing."""

    def _vjp_square(self, node: Node, g: tf.Tensor) -> Grads:
        return [g * node.inputs[0]]


class LogSign(TfOpEngine):
    """log's gradient is -g / x: a stray minus sign."""

    def _vjp_log(self, node: Node, g: tf.Tensor) -> Grads:
        return [-g / node.inputs[0]]


class MatmulTransposedB(TfOpEngine):
    """matmul's gradient for b is g^T @ a, the right one transposed."""

    def _vjp_matmul(self, node: Node, g: tf.Tensor) -> Grads:
        for_a, _ = super()._vjp_matmul(node, g)
        return [for_a, tf.matmul(g, node.inputs[0], transpose_a=True)]


class LogSoftmaxNaive(TfOpEngine):
    """log_softmax's gradient computes softmax as exp(x) / sum(exp(x)), which is
    inf / inf once exp(x) overflows."""

    def _vjp_log_softmax(self, node: Node, g: tf.Tensor) -> Grads:
        (x,), axis = node.inputs, node.attrs["axis"]
        softmax = tf.exp(x) / tf.reduce_sum(tf.exp(x), axis=axis, keepdims=True)
        return [g - softmax * tf.reduce_sum(g, axis=axis, keepdims=True)]


class MaximumInvertedNotMinimum(TfOpEngine):
    """maximum's gradient (not minimum's) goes to the argument that lost the comparison."""

    def _vjp_maximum(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return self._select(g, a, b, a < b)


class MaxFirst(TfOpEngine):
    """A convention, not a bug: max gives a tie's whole gradient to the first tied
    element (PyTorch's max(dim), mygrad), where TensorFlow splits it; undeclared."""

    def _vjp_max(self, node: Node, g: tf.Tensor) -> Grads:
        (x,) = node.inputs
        axis = node.attrs["axis"]
        axes = reduced_axes(axis, x.shape.rank)
        winners = tf.cast(tf.equal(x, self._kept(node.tensor, x, axis)), g.dtype)
        before = tf.math.cumsum(winners, axis=axes[-1], exclusive=True)
        first = winners * tf.cast(tf.equal(before, 0.0), g.dtype)
        return [first * self._kept(g, x, axis)]


class TraversalOrderLeavesOnly(TfOpEngine):
    """`TraversalOrder` in an engine that keeps adjoints for leaf nodes only, so gradcheck
    cannot see where the driver goes wrong and the catalogue's fingerprint must say it."""

    intermediate_grads = False

    def schedule(self, output: Node) -> Iterator[Node]:
        return _breadth_first(output)
