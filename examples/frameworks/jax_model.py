"""A JAX loss with a custom_vjp whose backward forgot a square (tanh' = 1 - y**2).

    python examples/frameworks/jax_model.py          # gradcheck.jax.check's report
    python examples/frameworks/jax_model.py --jax    # jax.test_util.check_grads'

docs/pytorch-and-jax.md shows the two side by side.
"""

import sys

import jax
import jax.numpy as jnp


@jax.custom_vjp
def tanh(x):
    return jnp.tanh(x)


def tanh_fwd(x):
    y = jnp.tanh(x)
    return y, y


def tanh_bwd(y, g):
    return (g * (1 - y),)  # the bug: 1 - y**2


tanh.defvjp(tanh_fwd, tanh_bwd)


def loss(params, x):
    h = tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"]) ** 2)


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {
        "w1": jax.random.normal(keys[0], (3, 4)),
        "b1": jnp.zeros(4),
        "w2": jax.random.normal(keys[1], (4, 2)),
    }
    x = jax.random.normal(keys[2], (5, 3))
    if "--jax" in sys.argv:
        from jax.test_util import check_grads

        check_grads(loss, (params, x), order=1, modes=["rev"])
    else:
        import gradcheck.jax

        print(gradcheck.jax.check(loss, params, x))


if __name__ == "__main__":
    main()
