"""The question's autodiff with its one-line fix: the matmul VJP swaps only the last two axes.

``seed_engine.py`` transposes with ``tf.transpose(t)``, which reverses *all* axes;
a batched matmul's VJP needs ``tf.linalg.matrix_transpose(t)``, which swaps the last
two and leaves the batch axes alone. Everything else (node class, ``unbroadcast``, the
queue-driven ``gradient`` loop) is imported from ``seed_engine.py`` unchanged, so the
difference between the two files is the fix and nothing else::

    $ python examples/seed_engine_fixed.py
    $ gradcheck run cases/seed.yaml --engine examples/seed_engine_fixed.py

On the question's case this reproduces TensorFlow's three gradients exactly: the
leading-axes-only ``unbroadcast`` is enough there (``y`` of shape (2, 2) against a
batch of shape (2, 2, 2) needs its leading axis summed, which it does). It is not a
complete engine: it still supports matmul only and float32 only, and its
``unbroadcast`` does not sum axes where an operand had size 1 (a (1, M, N) batch
against (B, M, N)); gradcheck's other matmul cases show both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import tensorflow as tf

# gradcheck may load this file by path; make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from seed_engine import Engine as SeedEngine
from seed_engine import LocalGradient, Node, _demo


def gradient_matmul(node: Node, dx: Node, adj: tf.Tensor) -> tf.Tensor | None:
    a = node.parents[0]
    b = node.parents[1]
    # the operation was node.tensor = tf.matmul(a.tensor, b.tensor)
    if a == dx or b == dx:
        mm = (
            tf.matmul(adj, tf.linalg.matrix_transpose(b.tensor))  # FIX: swap the last two axes
            if a == dx
            else tf.matmul(tf.linalg.matrix_transpose(a.tensor), adj)  # FIX: same
        )
        return mm
    else:
        return None


class Engine(SeedEngine):
    """The question's autodiff with the corrected matmul VJP."""

    name = "seed-engine-fixed"
    local_gradient: LocalGradient = staticmethod(gradient_matmul)


if __name__ == "__main__":
    _demo(Engine())
