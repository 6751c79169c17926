"""smooth_relu with a hand-written tf.custom_gradient, checked against TensorFlow's own
differentiation of the plain formula (the TensorFlow builder in smooth_relu_ops.py).

    gradcheck run examples/custom_op/cases.yaml --ops examples/custom_op/smooth_relu_ops.py \
        --engine examples/custom_op/tf_engine.py

Every builtin op comes from `TensorFlowAdapter` (``--engine tensorflow``); `record` puts
the custom op on the adapter's gradient tape.
"""

import tensorflow as tf

from gradcheck.engines.stock.tensorflow import TensorFlowAdapter


@tf.custom_gradient
def smooth_relu(x):
    def gradient(upstream):
        return upstream * tf.sigmoid(x)

    return tf.math.softplus(x), gradient


class Engine(TensorFlowAdapter):
    name = "tensorflow+smooth_relu"

    def smooth_relu(self, x):
        return self.record(smooth_relu, x)
