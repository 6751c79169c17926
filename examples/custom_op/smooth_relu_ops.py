"""A user-defined op: smooth_relu, declared once for every part of gradcheck (SPEC §9).
It is softplus under the name a custom-op author gives their own (gradcheck's registry
has a softplus of its own, which a user op may not shadow).

    gradcheck run examples/custom_op/cases.yaml --ops examples/custom_op/smooth_relu_ops.py \
        --engine examples/custom_op/torch_engine.py

The NumPy forward and VJP serve the builtin engine and the numeric reference. The
TensorFlow builder is the plain formula, log(1 + e ** x), with no gradient of its own:
the TensorFlow reference differentiates it with TensorFlow's autodiff, so the oracle owes
nothing to the hand-written gradients it checks (tf_engine.py, torch_engine.py,
jax_engine.py). log(1 + e ** x) overflows for x > 709 (float64); the cases stay far below.
"""

import numpy as np

import gradcheck


@gradcheck.op(
    shape=gradcheck.same_shape,
    vjps=[lambda g, ans, x: g * -np.expm1(-ans)],  # smooth_relu' = sigmoid = 1 - e ** -y
    jvps=[lambda t, ans, x: t * -np.expm1(-ans)],  # forward mode: the same derivative
    rules=["g * (1 - np.exp(-y))"],  # the rules as the diagnosis's fixes state them
    tf_rules=["g * tf.sigmoid(x)"],
    jvp_rules=["t * (1 - np.exp(-y))"],
    tf_jvp_rules=["t * tf.sigmoid(x)"],
    torch_rules=["g * torch.sigmoid(x)"],  # for the fixes of torch_engine.py and jax_engine.py
    jax_rules=["g * jax.nn.sigmoid(x)"],
    torch_jvp_rules=["t * torch.sigmoid(x)"],
    jax_jvp_rules=["t * jax.nn.sigmoid(x)"],
    tf=lambda tf, x: tf.math.log(1.0 + tf.exp(x)),
)
def smooth_relu(x):
    """log(1 + e ** x), computed stably"""
    return np.logaddexp(0.0, x)
