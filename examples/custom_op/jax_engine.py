"""smooth_relu as a jax.custom_vjp function, checked through the stock JAX adapter.

    gradcheck run examples/custom_op/cases.yaml --ops examples/custom_op/smooth_relu_ops.py \
        --engine examples/custom_op/jax_engine.py

Every builtin op comes from `JaxEngine` (``--engine jax``, a functional engine); the
custom op is one method more, named as the op is declared in smooth_relu_ops.py.
"""

import jax
import jax.numpy as jnp

from gradcheck.engines.stock.jax import JaxEngine


@jax.custom_vjp
def smooth_relu(x):
    return jnp.logaddexp(0.0, x)


def _forward(x):
    return smooth_relu(x), x


def _backward(x, upstream):
    return (upstream * jax.nn.sigmoid(x),)


smooth_relu.defvjp(_forward, _backward)


class Engine(JaxEngine):
    name = "jax+smooth_relu"

    def smooth_relu(self, x):
        return smooth_relu(x)
