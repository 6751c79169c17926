"""The learner's autodiff from the question gradcheck grew from — bug included.

This is the code of ``/work/shared/seed`` (a Stack Exchange question: "my reverse-mode
autodiff disagrees with TensorFlow on ``matmul(matmul(x, y), z)``"), ported as
faithfully as possible to gradcheck's engine adapter protocol (SPEC §4). The node
class, ``gradient_matmul``, ``unbroadcast`` and the queue-driven ``gradient`` loop are
the question's; only the adapter class at the bottom is new.

The bug: ``gradient_matmul`` transposes with ``tf.transpose(t)``, and without ``perm``
``tf.transpose`` reverses *all* axes. For a batch of matrices of shape (B, M, N) that
gives (N, M, B) instead of (B, N, M), so the VJP of a batched matmul mixes the batch
axis into the matrix axes. For 2-D operands the two transposes coincide, which is why
the code looks right on every unbatched test. On the question's inputs this single
fault reproduces all three wrong gradients exactly::

    $ python examples/seed_engine.py
    $ gradcheck run cases/seed.yaml --engine examples/seed_engine.py

The fix (swap only the last two axes, ``tf.linalg.matrix_transpose``) lives in
``seed_engine_fixed.py``, which imports this module and overrides only that.

Only ``matmul`` is implemented, as in the question; gradcheck reports every case that
uses another op as ``unsupported``. Like the question's code it also works in float32
only: every adjoint starts as the Python float ``0.0`` (``defaultdict(float)``), which
``tf.add`` turns into a float32 tensor, so a float64 case ends in an engine error.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf


class Node:
    """A value of the graph: its tensor, the nodes it was computed from, and whether it
    is a stored value (an input or a constant: the backward pass stops there)."""

    def __init__(self, tensor: tf.Tensor, parents: Sequence[Node] = (), is_store: bool = False):
        self.tensor = tensor
        self.parents = list(parents)
        self.is_store = is_store


# A node's local gradient with respect to one of its parents, given the node's adjoint.
LocalGradient = Callable[[Node, Node, tf.Tensor], "tf.Tensor | None"]


# --- the question's code, unchanged except for type hints ---------------------------


def gradient_matmul(node: Node, dx: Node, adj: tf.Tensor) -> tf.Tensor | None:
    # dx is needed to know which of both parents should be derived
    a = node.parents[0]
    b = node.parents[1]
    # the operation was node.tensor = tf.matmul(a.tensor, b.tensor)
    if a == dx or b == dx:
        # result depends on which of the parents is the derivative
        mm = (
            tf.matmul(adj, tf.transpose(b.tensor))  # BUG: reverses all axes, not the last two
            if a == dx
            else tf.matmul(tf.transpose(a.tensor), adj)  # BUG: same
        )
        return mm
    else:
        return None


def unbroadcast(adjoint: tf.Tensor, node: tf.Tensor) -> tf.Tensor:
    dim_a = len(adjoint.shape)
    dim_b = len(node.shape)
    if dim_a > dim_b:
        sum = tuple(range(dim_a - dim_b))
        res = tf.math.reduce_sum(adjoint, axis=sum)
        return res
    return adjoint


def gradient(
    y: Node,
    dx: Node,
    cotangent: tf.Tensor | None = None,
    local_gradient: LocalGradient = gradient_matmul,
) -> tf.Tensor | None:
    # Two additions to the question's loop, neither changes what it computes there:
    # `cotangent` seeds y's adjoint (the question always used ones, which is what
    # gradcheck's default cotangent is), and `local_gradient` lets the fixed engine
    # swap in its corrected `gradient_matmul` without copying this loop.
    working = [y]
    adjoints: defaultdict[Node, tf.Tensor | float] = defaultdict(float)
    adjoints[y] = tf.ones(y.tensor.shape) if cotangent is None else cotangent
    while len(working) != 0:
        curr = working.pop(0)
        if curr == dx:
            return adjoints[curr]
        if curr.is_store:
            continue
        adj = adjoints[curr]
        for p in curr.parents:
            # for testing with matrix multiplication as only operation
            local_grad = local_gradient(curr, p, adj)
            adjoints[p] = unbroadcast(tf.add(adjoints[p], local_grad), p.tensor)
            if p not in working:
                working.append(p)
    return None  # dx was never reached (the question's function fell off the end too)


# --- the gradcheck adapter (SPEC §4) -------------------------------------------------


class Engine:
    """The question's autodiff behind gradcheck's adapter protocol: matmul only."""

    name = "seed-engine"
    local_gradient: LocalGradient = staticmethod(gradient_matmul)

    def leaf(self, name: str, value: np.ndarray) -> Node:
        return Node(tf.constant(value), is_store=True)

    def constant(self, value: np.ndarray) -> Node:
        return Node(tf.constant(value), is_store=True)

    def matmul(self, a: Node, b: Node) -> Node:
        return Node(tf.matmul(a.tensor, b.tensor), parents=[a, b])

    def value(self, node: Node) -> np.ndarray:
        return node.tensor.numpy()

    def grad(self, output: Node, wrt: Sequence[Node], cotangent: np.ndarray) -> list:
        seed = tf.constant(cotangent, dtype=output.tensor.dtype)
        grads = [gradient(output, dx, seed, self.local_gradient) for dx in wrt]
        return [None if g is None else g.numpy() for g in grads]


def _demo(engine: Engine) -> None:
    """Run the question's test on `engine` and print its three gradients."""
    x = [[[1.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]]
    y = [[3.0, -7.0], [-1.0, 5.0]]
    z = [[[1, 1], [2.0, 2]], [[3, 3], [-1, -1]]]
    inputs = {"x": x, "y": y, "z": z}
    leaves = [engine.leaf(n, np.asarray(v, np.float32)) for n, v in inputs.items()]
    w = engine.matmul(engine.matmul(leaves[0], leaves[1]), leaves[2])
    ones = np.ones(engine.value(w).shape, np.float32)
    for name, g in zip("xyz", engine.grad(w, leaves, ones), strict=True):
        print(f"d/d{name}:\n{g}")


if __name__ == "__main__":
    _demo(Engine())
