"""``--engine tensorflow``: TensorFlow as the engine under test (the reference's engine,
`references.tensorflow`, on two persistent tapes)."""

from __future__ import annotations

from typing import Any

from ...references.tensorflow import TensorFlowEngine


class TensorFlowAdapter(TensorFlowEngine):
    """``--engine tensorflow``: TensorFlow as the engine under test, say against
    ``--reference numeric``, or subclassed with one method that records a custom op
    (``tf.custom_gradient``) on the tape::

        class Engine(TensorFlowAdapter):
            def smooth_relu(self, x):
                return self.record(my_smooth_relu, x)
    """

    driver = "tensorflow"

    def __init__(self) -> None:
        # gradcheck asks for the gradients twice; two tapes, for second-order cases.
        super().__init__(persistent=True, order=2)

    def record(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)`, computed on the gradient tapes."""
        with self.recording():
            return fn(*args, **kwargs)
