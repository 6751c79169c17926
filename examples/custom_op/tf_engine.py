"""softplus with a hand-written tf.custom_gradient, checked against TensorFlow's own
differentiation of the plain formula (the TensorFlow builder in softplus_ops.py).

    gradcheck run examples/custom_op/cases.yaml --ops examples/custom_op/softplus_ops.py \
        --engine examples/custom_op/tf_engine.py

Every builtin op comes from `TensorFlowAdapter` (``--engine tensorflow``); `record` puts
the custom op on the adapter's gradient tape.
"""

import tensorflow as tf

from gradcheck.engines.stock.tensorflow import TensorFlowAdapter


@tf.custom_gradient
def softplus(x):
    def gradient(upstream):
        return upstream * tf.sigmoid(x)

    return tf.math.softplus(x), gradient


class Engine(TensorFlowAdapter):
    name = "tensorflow+softplus"

    def softplus(self, x):
        return self.record(softplus, x)
