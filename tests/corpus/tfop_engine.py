"""A reverse-mode engine whose VJPs are written with TensorFlow ops: a correct corpus engine.

This is the style of the question gradcheck grew from (/work/shared/seed): every
`Node` holds a `tf.Tensor` computed eagerly with the `tf` op of the same name, and
each op's VJP (`_vjp_<op>(node, g)`, one gradient per parent, like a function in
TensorFlow's own gradient registry) is built from `tf.matmul`,
`tf.linalg.matrix_transpose`, `tf.reduce_sum`... Each VJP returns gradients already
in its parents' shapes: binary ops and matmul sum broadcast axes away themselves with
`unbroadcast`, as TensorFlow's `_AddGrad` and `_MatMulGrad` do.

The backward pass is driven by `schedule`, a reverse topological order computed with
Kahn's algorithm: a node is visited only once every node that consumed it has passed
its gradient on, so its adjoint is complete when it is propagated. (The question's
breadth-first queue breaks exactly that rule; `tfop_bugs.TraversalOrder` plants it.)

`tfop_bugs.py` overrides one `_vjp_<op>` or `schedule` per bug (and may set
`intermediate_grads = False`: the engine then refuses gradients with respect to
intermediate nodes). No `getitem`.

    gradcheck run cases/ --engine tests/corpus/tfop_engine.py
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # no C++ start-up noise in reports
import tensorflow as tf

Axis = int | Sequence[int] | None
Grads = list[tf.Tensor]


class Node:
    """A tensor of the graph and how it was made. Compared by identity (a dict key)."""

    __slots__ = ("attrs", "label", "op", "parents", "tensor")

    def __init__(
        self,
        tensor: tf.Tensor,
        op: str | None = None,
        parents: Sequence[Node] = (),
        label: str = "",
        **attrs: Any,
    ) -> None:
        self.tensor = tensor
        self.op = op
        self.parents = tuple(parents)
        self.attrs = attrs
        self.label = label

    @property
    def inputs(self) -> list[tf.Tensor]:
        """The parents' tensors, what a VJP reads (TensorFlow's `op.inputs`)."""
        return [p.tensor for p in self.parents]

    def __repr__(self) -> str:
        return f"Node({self.op or self.label or 'constant'}, shape={self.tensor.shape})"


def reduced_axes(axis: Axis, rank: int) -> list[int]:
    """The axes a reduction reduces, non-negative and sorted (None: all of them)."""
    axes = range(rank) if axis is None else [axis] if isinstance(axis, int) else axis
    return sorted(a % rank for a in axes)


class Engine:
    """Eager TensorFlow forward pass, hand-written TensorFlow VJPs, Kahn-ordered backward."""

    name = "tfop"
    intermediate_grads = True  # False: refuse gradients with respect to non-leaf nodes

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = f"tfop/{cls.__name__}"  # a planted bug shows up under its own name

    # -- the adapter protocol -------------------------------------------------------------
    def leaf(self, name: str, value: np.ndarray) -> Node:
        return Node(tf.constant(value), label=name)

    def constant(self, value: np.ndarray) -> Node:
        return Node(tf.constant(value))

    def value(self, node: Node) -> np.ndarray:
        return node.tensor.numpy()

    def grad(self, output: Node, wrt: Sequence[Node], cotangent: np.ndarray) -> list[np.ndarray]:
        if not self.intermediate_grads and any(node.op for node in wrt):
            raise ValueError("adjoints are kept for leaf nodes only")
        adjoints = self.backward(output, tf.constant(cotangent, dtype=output.tensor.dtype))
        return [
            adjoints[n].numpy() if n in adjoints else np.zeros_like(n.tensor.numpy()) for n in wrt
        ]

    # -- the backward pass ----------------------------------------------------------------
    def backward(self, output: Node, cotangent: tf.Tensor) -> dict[Node, tf.Tensor]:
        """Every node's adjoint: visit nodes in `schedule` order, each passing its adjoint
        through its op's VJP to its parents, adding up where a node has several consumers."""
        adjoints = {output: cotangent}
        for node in self.schedule(output):
            if node.op is None:  # an input or a constant
                continue
            grads = getattr(self, f"_vjp_{node.op}")(node, adjoints[node])
            for parent, grad in zip(node.parents, grads, strict=True):
                adjoints[parent] = tf.add(adjoints[parent], grad) if parent in adjoints else grad
        return adjoints

    def schedule(self, output: Node) -> Iterator[Node]:
        """Reverse topological order by Kahn's algorithm: yield a node once every one of
        its consumers has been yielded (and so has contributed to its adjoint)."""
        consumers: Counter[Node] = Counter()
        seen, stack = {output}, [output]
        while stack:  # count each node's uses, walking the graph once
            for parent in stack.pop().parents:
                consumers[parent] += 1
                if parent not in seen:
                    seen.add(parent)
                    stack.append(parent)
        ready = [output]
        while ready:
            node = ready.pop()
            yield node
            for parent in node.parents:
                consumers[parent] -= 1
                if consumers[parent] == 0:
                    ready.append(parent)

    def unbroadcast(self, grad: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
        """Sum `grad` back to `like`'s shape: over the axes broadcasting added in front,
        and over the axes where `like` had size 1."""
        shape = like.shape.as_list()
        lead = grad.shape.rank - len(shape)
        axes = [*range(lead), *(lead + i for i, d in enumerate(shape) if d == 1)]
        if axes:
            grad = tf.reduce_sum(grad, axis=axes)
        return tf.reshape(grad, shape)

    def _apply(self, op: str, parents: Sequence[Node], tensor: tf.Tensor, **attrs: Any) -> Node:
        return Node(tensor, op, parents, **attrs)

    # -- elementwise binary ops -----------------------------------------------------------
    def add(self, a: Node, b: Node) -> Node:
        return self._apply("add", [a, b], tf.add(a.tensor, b.tensor))

    def sub(self, a: Node, b: Node) -> Node:
        return self._apply("sub", [a, b], tf.subtract(a.tensor, b.tensor))

    def mul(self, a: Node, b: Node) -> Node:
        return self._apply("mul", [a, b], tf.multiply(a.tensor, b.tensor))

    def div(self, a: Node, b: Node) -> Node:
        return self._apply("div", [a, b], tf.divide(a.tensor, b.tensor))

    def pow(self, a: Node, b: Node) -> Node:
        return self._apply("pow", [a, b], tf.pow(a.tensor, b.tensor))

    def maximum(self, a: Node, b: Node) -> Node:
        return self._apply("maximum", [a, b], tf.maximum(a.tensor, b.tensor))

    def minimum(self, a: Node, b: Node) -> Node:
        return self._apply("minimum", [a, b], tf.minimum(a.tensor, b.tensor))

    def _vjp_add(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return [self.unbroadcast(g, a), self.unbroadcast(g, b)]

    def _vjp_sub(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return [self.unbroadcast(g, a), self.unbroadcast(-g, b)]

    def _vjp_mul(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return [self.unbroadcast(g * b, a), self.unbroadcast(g * a, b)]

    def _vjp_div(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return [self.unbroadcast(g / b, a), self.unbroadcast(-g * a / tf.square(b), b)]

    def _vjp_pow(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        positive = a > 0  # TensorFlow: no exponent gradient where the base is <= 0
        log_a = tf.where(positive, tf.math.log(tf.where(positive, a, tf.ones_like(a))), 0)
        return [
            self.unbroadcast(g * b * tf.pow(a, b - 1), a),
            self.unbroadcast(g * node.tensor * log_a, b),
        ]

    def _vjp_maximum(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return self._select(g, a, b, a >= b)  # a tie goes to a

    def _vjp_minimum(self, node: Node, g: tf.Tensor) -> Grads:
        a, b = node.inputs
        return self._select(g, a, b, a <= b)

    def _select(self, g: tf.Tensor, a: tf.Tensor, b: tf.Tensor, a_wins: tf.Tensor) -> Grads:
        zeros = tf.zeros_like(g)
        return [
            self.unbroadcast(tf.where(a_wins, g, zeros), a),
            self.unbroadcast(tf.where(a_wins, zeros, g), b),
        ]

    # -- elementwise unary ops ------------------------------------------------------------
    def neg(self, x: Node) -> Node:
        return self._apply("neg", [x], tf.negative(x.tensor))

    def exp(self, x: Node) -> Node:
        return self._apply("exp", [x], tf.exp(x.tensor))

    def log(self, x: Node) -> Node:
        return self._apply("log", [x], tf.math.log(x.tensor))

    def sqrt(self, x: Node) -> Node:
        return self._apply("sqrt", [x], tf.sqrt(x.tensor))

    def abs(self, x: Node) -> Node:
        return self._apply("abs", [x], tf.abs(x.tensor))

    def square(self, x: Node) -> Node:
        return self._apply("square", [x], tf.square(x.tensor))

    def sin(self, x: Node) -> Node:
        return self._apply("sin", [x], tf.sin(x.tensor))

    def cos(self, x: Node) -> Node:
        return self._apply("cos", [x], tf.cos(x.tensor))

    def tanh(self, x: Node) -> Node:
        return self._apply("tanh", [x], tf.tanh(x.tensor))

    def sigmoid(self, x: Node) -> Node:
        return self._apply("sigmoid", [x], tf.sigmoid(x.tensor))

    def relu(self, x: Node) -> Node:
        return self._apply("relu", [x], tf.nn.relu(x.tensor))

    def _vjp_neg(self, node: Node, g: tf.Tensor) -> Grads:
        return [-g]

    def _vjp_exp(self, node: Node, g: tf.Tensor) -> Grads:
        return [g * node.tensor]

    def _vjp_log(self, node: Node, g: tf.Tensor) -> Grads:
        return [g / node.inputs[0]]

    def _vjp_sqrt(self, node: Node, g: tf.Tensor) -> Grads:
        return [0.5 * g / node.tensor]

    def _vjp_abs(self, node: Node, g: tf.Tensor) -> Grads:
        return [g * tf.sign(node.inputs[0])]  # abs'(0) = 0

    def _vjp_square(self, node: Node, g: tf.Tensor) -> Grads:
        return [g * 2 * node.inputs[0]]

    def _vjp_sin(self, node: Node, g: tf.Tensor) -> Grads:
        return [g * tf.cos(node.inputs[0])]

    def _vjp_cos(self, node: Node, g: tf.Tensor) -> Grads:
        return [-g * tf.sin(node.inputs[0])]

    def _vjp_tanh(self, node: Node, g: tf.Tensor) -> Grads:
        y = node.tensor
        return [g * (1 - y * y)]

    def _vjp_sigmoid(self, node: Node, g: tf.Tensor) -> Grads:
        y = node.tensor
        return [g * y * (1 - y)]

    def _vjp_relu(self, node: Node, g: tf.Tensor) -> Grads:
        return [tf.where(node.inputs[0] > 0, g, tf.zeros_like(g))]  # relu'(0) = 0

    # -- linear algebra -------------------------------------------------------------------
    def matmul(self, a: Node, b: Node) -> Node:
        return self._apply("matmul", [a, b], tf.matmul(a.tensor, b.tensor))

    def _vjp_matmul(self, node: Node, g: tf.Tensor) -> Grads:
        # matrix_transpose swaps the last two axes only (tf.transpose would reverse all
        # of them); the batch axes an operand was broadcast along are then summed away.
        a, b = node.inputs
        return [
            self.unbroadcast(tf.matmul(g, tf.linalg.matrix_transpose(b)), a),
            self.unbroadcast(tf.matmul(tf.linalg.matrix_transpose(a), g), b),
        ]

    # -- reductions -----------------------------------------------------------------------
    def sum(self, x: Node, axis: Axis = None, keepdims: bool = False) -> Node:
        return self._reduce("sum", tf.reduce_sum, x, axis, keepdims)

    def mean(self, x: Node, axis: Axis = None, keepdims: bool = False) -> Node:
        return self._reduce("mean", tf.reduce_mean, x, axis, keepdims)

    def max(self, x: Node, axis: Axis = None, keepdims: bool = False) -> Node:
        return self._reduce("max", tf.reduce_max, x, axis, keepdims)

    def min(self, x: Node, axis: Axis = None, keepdims: bool = False) -> Node:
        return self._reduce("min", tf.reduce_min, x, axis, keepdims)

    def logsumexp(self, x: Node, axis: Axis = None, keepdims: bool = False) -> Node:
        return self._reduce("logsumexp", tf.reduce_logsumexp, x, axis, keepdims)

    def _reduce(self, op: str, fn: Any, x: Node, axis: Axis, keepdims: bool) -> Node:
        tensor = fn(x.tensor, axis=axis, keepdims=keepdims)
        return self._apply(op, [x], tensor, axis=axis, keepdims=keepdims)

    @staticmethod
    def _kept(t: tf.Tensor, x: tf.Tensor, axis: Axis) -> tf.Tensor:
        """A reduction's output reshaped to keep the reduced axes (as size 1)."""
        axes = reduced_axes(axis, x.shape.rank)
        return tf.reshape(t, [1 if i in axes else d for i, d in enumerate(x.shape.as_list())])

    def _vjp_sum(self, node: Node, g: tf.Tensor) -> Grads:
        (x,) = node.inputs
        return [tf.broadcast_to(self._kept(g, x, node.attrs["axis"]), tf.shape(x))]

    def _vjp_mean(self, node: Node, g: tf.Tensor) -> Grads:
        (x,) = node.inputs
        axis = node.attrs["axis"]
        count = int(np.prod([x.shape[i] for i in reduced_axes(axis, x.shape.rank)]))
        return [tf.broadcast_to(self._kept(g, x, axis), tf.shape(x)) / count]

    def _vjp_max(self, node: Node, g: tf.Tensor) -> Grads:
        (x,) = node.inputs
        axis = node.attrs["axis"]
        winners = tf.cast(tf.equal(x, self._kept(node.tensor, x, axis)), g.dtype)
        ties = tf.reduce_sum(winners, axis=reduced_axes(axis, x.shape.rank), keepdims=True)
        return [winners / ties * self._kept(g, x, axis)]  # ties share the gradient equally

    _vjp_min = _vjp_max

    def _vjp_logsumexp(self, node: Node, g: tf.Tensor) -> Grads:
        (x,) = node.inputs
        axis = node.attrs["axis"]
        return [self._kept(g, x, axis) * tf.exp(x - self._kept(node.tensor, x, axis))]

    # -- shape ops ------------------------------------------------------------------------
    def reshape(self, x: Node, shape: Sequence[int]) -> Node:
        return self._apply("reshape", [x], tf.reshape(x.tensor, shape))

    def expand_dims(self, x: Node, axis: int = 0) -> Node:
        return self._apply("reshape", [x], tf.expand_dims(x.tensor, axis))

    def squeeze(self, x: Node, axis: Axis = None) -> Node:
        return self._apply("reshape", [x], tf.squeeze(x.tensor, axis))

    def _vjp_reshape(self, node: Node, g: tf.Tensor) -> Grads:
        return [tf.reshape(g, tf.shape(node.inputs[0]))]  # also expand_dims' and squeeze's

    def transpose(self, x: Node, perm: Sequence[int] | None = None) -> Node:
        perm = list(range(x.tensor.shape.rank))[::-1] if perm is None else list(perm)
        return self._apply("transpose", [x], tf.transpose(x.tensor, perm), perm=perm)

    def _vjp_transpose(self, node: Node, g: tf.Tensor) -> Grads:
        return [tf.transpose(g, tf.math.invert_permutation(node.attrs["perm"]))]

    def matrix_transpose(self, x: Node) -> Node:
        return self._apply("matrix_transpose", [x], tf.linalg.matrix_transpose(x.tensor))

    def _vjp_matrix_transpose(self, node: Node, g: tf.Tensor) -> Grads:
        return [tf.linalg.matrix_transpose(g)]

    def broadcast_to(self, x: Node, shape: Sequence[int]) -> Node:
        return self._apply("broadcast_to", [x], tf.broadcast_to(x.tensor, shape))

    def _vjp_broadcast_to(self, node: Node, g: tf.Tensor) -> Grads:
        return [self.unbroadcast(g, node.inputs[0])]

    def concat(self, values: Sequence[Node], axis: int = 0) -> Node:
        joined = tf.concat([v.tensor for v in values], axis)
        return self._apply("concat", values, joined, axis=axis)

    def _vjp_concat(self, node: Node, g: tf.Tensor) -> Grads:
        axis = node.attrs["axis"]
        return tf.split(g, [x.shape[axis] for x in node.inputs], axis=axis)

    def stack(self, values: Sequence[Node], axis: int = 0) -> Node:
        return self._apply("stack", values, tf.stack([v.tensor for v in values], axis), axis=axis)

    def _vjp_stack(self, node: Node, g: tf.Tensor) -> Grads:
        return tf.unstack(g, axis=node.attrs["axis"])

    # -- nn -------------------------------------------------------------------------------
    def softmax(self, x: Node, axis: int = -1) -> Node:
        return self._apply("softmax", [x], tf.nn.softmax(x.tensor, axis=axis), axis=axis)

    def log_softmax(self, x: Node, axis: int = -1) -> Node:
        return self._apply("log_softmax", [x], tf.nn.log_softmax(x.tensor, axis=axis), axis=axis)

    def _vjp_softmax(self, node: Node, g: tf.Tensor) -> Grads:
        s, axis = node.tensor, node.attrs["axis"]
        return [s * (g - tf.reduce_sum(g * s, axis=axis, keepdims=True))]

    def _vjp_log_softmax(self, node: Node, g: tf.Tensor) -> Grads:
        axis = node.attrs["axis"]
        return [g - tf.exp(node.tensor) * tf.reduce_sum(g, axis=axis, keepdims=True)]
