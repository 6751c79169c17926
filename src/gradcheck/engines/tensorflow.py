"""The reference: the expression built from `tf` ops under a `tf.GradientTape`.

TensorFlow is imported on first use only, so that `gradcheck --version`, `list`, `ops`
and `schema` stay fast, and its start-up log noise is silenced before the import.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from functools import cache
from typing import Any

import numpy as np

from ..ops import Op
from .protocol import with_op_methods


@contextlib.contextmanager
def silenced_stderr() -> Iterator[None]:
    """Point fd 2 at /dev/null: absl logs from C++ before any Python setting applies."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@cache
def load_tensorflow() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # C++ INFO/WARNING lines at import
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # its banner, and bit-for-bit repeatability
    with silenced_stderr():
        import tensorflow as tf

        tf.constant(0.0)  # the first op initialises the runtime, which logs too

    tf.get_logger().setLevel("ERROR")
    return tf


def reference_name() -> str:
    return f"tensorflow {load_tensorflow().__version__}"


@with_op_methods
class TensorFlowEngine:
    """Speaks the adapter protocol, so the reference runs through the same driver as any engine."""

    name = "tensorflow"

    def __init__(self) -> None:
        self.tf = load_tensorflow()
        # Persistent, so the gradients can be asked for twice (the stale-gradient check).
        self.tape = self.tf.GradientTape(persistent=True)

    def leaf(self, name: str, value: Any) -> Any:
        tensor = self.tf.constant(value)
        with self.tape:
            self.tape.watch(tensor)
        return tensor

    def constant(self, value: Any) -> Any:
        return self.tf.constant(value)

    def apply(self, op: Op, args: list[Any], attrs: dict[str, Any]) -> Any:
        with self.tape:
            if op.variadic:
                return op.tf(self.tf, args, **attrs)
            return op.tf(self.tf, *args, **attrs)

    def value(self, node: Any) -> np.ndarray:
        return node.numpy()

    def grad(self, output: Any, wrt: list[Any], cotangent: Any) -> list[np.ndarray]:
        grads = self.tape.gradient(
            output,
            wrt,
            output_gradients=self.tf.constant(cotangent, dtype=output.dtype),
            unconnected_gradients=self.tf.UnconnectedGradients.ZERO,
        )
        return [g.numpy() for g in grads]
