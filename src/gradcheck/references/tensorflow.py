"""The reference: the expression built from `tf` ops under a `tf.GradientTape`.

Forward mode is `tf.autodiff.ForwardAccumulator` around the expression as a function
(``jvp(fn, primals, tangents)``); second order records under two nested tapes, so that
the inner tape's gradient is recorded by the outer one (``grad(..., create_graph=True)``).

TensorFlow is imported on first use only, so that `gradcheck --version`, `list`, `ops`
and `schema` stay fast, and its start-up log noise is silenced before the import.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from functools import cache
from typing import Any

import numpy as np

from ..engines.protocol import with_op_methods
from ..ops import Op
from ..util.stderr import quiet_import

# When TensorFlow's one-off import ran (time.perf_counter()), once it has: per-case
# durations leave it out, as pytest's leave out collection.
import_span: tuple[float, float] | None = None
_IMPORTING = threading.Lock()  # the reference's thread and the main thread may both ask
# TensorFlow's intra-op threads (`limit_threads`), applied as it is imported; None: its own.
_intra_op_threads: int | None = None


def importing() -> bool:
    """Whether `load_tensorflow` is importing TensorFlow now, on some thread."""
    return _IMPORTING.locked()


@cache
def load_tensorflow() -> Any:
    global import_span
    with _IMPORTING:
        started = time.perf_counter()
        with quiet_import():
            import tensorflow as tf

            if _intra_op_threads:  # only before the runtime starts (the first op)
                tf.config.threading.set_intra_op_parallelism_threads(_intra_op_threads)
            tf.constant(0.0)  # the first op initialises the runtime, which logs too

        tf.get_logger().setLevel("ERROR")
        if import_span is None:
            import_span = started, time.perf_counter()
    return tf


def limit_threads(threads: int) -> None:
    """TensorFlow's intra-op threads, from its import on (`runner.threads`): once its
    runtime has started they are fixed, so a later call changes nothing."""
    global _intra_op_threads
    if not load_tensorflow.cache_info().currsize:
        _intra_op_threads = threads


def intra_op_threads() -> int | None:
    """The intra-op threads TensorFlow was given, once imported (None: its default, all
    the cores, or not imported)."""
    if not load_tensorflow.cache_info().currsize:
        return None
    return load_tensorflow().config.threading.get_intra_op_parallelism_threads() or None


# The distributions TensorFlow ships as; `tensorflow` first, as the others may depend on it.
DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-macos",
    "tensorflow-intel",
    "tf-nightly",
)


@cache
def installed_version() -> str | None:
    """TensorFlow's version from its package metadata, without importing it; None if absent.

    The reference cache keys on it, and a fully cached run must not pay TensorFlow's import.
    """
    from importlib import metadata

    for distribution in DISTRIBUTIONS:
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def reference_label(version: str | None = None) -> str:
    """`RunResult.reference`: "tensorflow <version>" (`installed_version()` unless given)."""
    version = version or installed_version()
    return f"tensorflow {version}" if version else "tensorflow (not installed)"


@with_op_methods
class TensorFlowEngine:
    """Speaks the adapter protocol, so the reference runs through the same driver as any
    engine. `order` tapes record the expression: 1 for gradients, 2 for second order (the
    outer one records what the inner one computes), 0 for forward mode alone."""

    name = "tensorflow"
    higher_order = True
    functional_jvp = True  # forward mode: jvp(fn, primals, tangents)

    def __init__(self, persistent: bool = False, order: int = 1) -> None:
        self.tf = load_tensorflow()
        # Entered around each op (the driver builds op by op), exited before `grad`;
        # the innermost last.
        self.tapes = [self.tf.GradientTape(persistent=persistent) for _ in range(order)]

    def recording(self) -> contextlib.AbstractContextManager[Any]:
        """Every tape that still records, outermost first. One tape (gradients, the usual
        case) is entered as it is: an ExitStack around it cost ~18% of a small case's
        reference, entered once per op (bench/per_check.py)."""
        if len(self.tapes) == 1:
            return self.tapes[0]
        return self._every_tape()

    @contextlib.contextmanager
    def _every_tape(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for tape in self.tapes:
                stack.enter_context(tape)
            yield

    def leaf(self, name: str, value: Any) -> Any:
        tensor = self.tf.constant(value)
        with self.recording():
            for tape in self.tapes:
                tape.watch(tensor)
        return tensor

    def constant(self, value: Any) -> Any:
        return self.tf.constant(value)

    def apply(self, op: Op, args: list[Any], attrs: dict[str, Any]) -> Any:
        if op.tf is None:  # a user op declared without a TensorFlow builder
            raise NotImplementedError(f"{op.name} declares no TensorFlow builder ({op.origin})")
        with self.recording():
            if op.variadic:
                return op.tf(self.tf, args, **attrs)
            return op.tf(self.tf, *args, **attrs)

    def value(self, node: Any) -> np.ndarray:
        return node.numpy()

    def grad(
        self, output: Any, wrt: list[Any], cotangent: Any, create_graph: bool = False
    ) -> list[Any]:
        """Arrays; with `create_graph`, tensors the outer tape recorded, and the innermost
        tape is spent (the next `grad` differentiates what it computed)."""
        tape = self.tapes.pop() if create_graph else self.tapes[-1]
        with self.recording():
            grads = tape.gradient(
                output,
                wrt,
                output_gradients=self.tf.constant(cotangent, dtype=output.dtype),
                unconnected_gradients=self.tf.UnconnectedGradients.ZERO,
            )
            # A gather's gradient comes as IndexedSlices: made dense, as every other is
            # (under the outer tapes, for second order to see through it).
            grads = [self.tf.convert_to_tensor(g) for g in grads]
        return grads if create_graph else [g.numpy() for g in grads]

    def jvp(self, fn: Any, primals: list[np.ndarray], tangents: list[np.ndarray]) -> np.ndarray:
        xs = [self.tf.constant(p) for p in primals]
        directions = [self.tf.constant(t) for t in tangents]
        with self.tf.autodiff.ForwardAccumulator(xs, directions) as accumulator:
            output = fn(*xs)
        tangent = accumulator.jvp(output, unconnected_gradients=self.tf.UnconnectedGradients.ZERO)
        return tangent.numpy()
