"""JAX functions and custom rules the traced-check tests run: correct ones, one per family
of primitives gradcheck maps, and the bugs people write in a custom rule.

Defined at the top of a module (not inside tests), as users define them, so a saved case's
ops file can import them again.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# -- correct functions, one per family of mapped primitives --------------------------------


def mlp(params, x):
    h = jax.nn.relu(jnp.einsum("bi,hi->bh", x, params["w1"]) + params["b1"])
    z = h @ params["w2"]
    return jnp.mean(jnp.sum((jax.nn.silu(z) + jax.nn.softplus(z)) ** 2, axis=-1))


def cnn(x, w, w2):
    nhwc = ("NHWC", "HWIO", "NHWC")
    y = jnp.tanh(jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=nhwc))
    top = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    mean = jax.lax.reduce_window(y, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") / 9.0
    nchw = jnp.transpose(top * mean, (0, 3, 1, 2))
    return jax.lax.conv(nchw, w2, (1, 2), [(1, 0), (0, 1)])  # NCHW and OIHW


def conv1d(x, w):
    y = jax.lax.conv_general_dilated(
        x, w, (2,), [(1, 1)], rhs_dilation=(2,), dimension_numbers=("NWC", "WIO", "NWC"),
        feature_group_count=2,
    )  # fmt: skip
    return jnp.sin(y)


def layer_norm(x, gain, bias):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5) * gain + bias


LABELS = np.array([1, 0, 3, 2, 3])


def cross_entropy(logits):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, LABELS[:, None], axis=1))


def cumulative(x):
    running = jnp.cumsum(x, axis=1) * jnp.cumprod(x, axis=0)[::-1]
    return running + jax.lax.cumsum(x, 0, reverse=True)


def layout(x):
    a, b = jnp.split(x, 2, axis=1)
    stacked = jnp.stack([a, jnp.tile(b[:, :1], (1, 3))], axis=0).reshape(2, -1)
    joined = jnp.concatenate([x[1:, ::2], x[:-1, 1::2] * 2.0], axis=0)
    zero = jnp.zeros((), x.dtype)
    interior = jax.lax.pad(x[:2, :3], zero, ((1, 2, 1), (0, 1, 0)))  # 6 x 4, as joined padded
    padded = jnp.pad(joined, ((0, 0), (1, 0))) + interior
    window = jax.lax.dynamic_slice(x, (1, 2), (2, 3))
    turned = jnp.squeeze(window[None, :2]).T * jnp.arange(2.0)
    return stacked.sum() + (padded**2).sum() + turned.sum()


def select(x, y):
    bent = jnp.where(x > 0, x, 0.1 * x) + jnp.maximum(x, y) * jnp.minimum(x, 2 * y)
    low, high = jnp.asarray(-0.5, y.dtype), jnp.asarray(0.5, y.dtype)
    return bent + jax.lax.clamp(low, y, high) + jnp.argmax(x, axis=1)[:, None] * 0.0


def gathers(x):
    rows, cols = np.array([[0, 1], [2, 0]]), np.array([[1, 1], [0, 3]])
    taken = jnp.take(x, np.array([0, 2, 2]), axis=0).sum(0)
    return taken + x[:, np.array([3, 0, 0, 1])][0] + x[rows, cols].sum()


def elementwise(x, y):
    positive = jnp.abs(y) + 1.0
    return (jnp.exp(x) + jnp.log(positive) - jnp.sin(x) * jnp.cos(y) + jnp.tan(x * 0.3)
            + jax.scipy.special.erf(x) + jnp.log1p(positive) + jnp.expm1(y * 0.5) + jnp.sign(x) * x
            + jnp.square(y) + jax.lax.rsqrt(positive) + positive**1.5 + jax.nn.sigmoid(x)
            - x / positive + jnp.tanh(y) ** 3 + jnp.sqrt(positive) + 2.0**x)  # fmt: skip


def reductions(x):
    return jax.nn.logsumexp(x, axis=0) + jnp.max(x, axis=1).sum() + jnp.min(x) + jnp.prod(x[:2])


def stable_logsumexp(x):
    return jax.nn.logsumexp(x, axis=-1)  # its shift is a stop_gradient that changes nothing


# -- custom rules ---------------------------------------------------------------------------


@jax.custom_vjp
def my_tanh(x):
    return jnp.tanh(x)


def my_tanh_fwd(x):
    y = jnp.tanh(x)
    return y, y


def my_tanh_bwd(y, g):
    return (g * (1 - y),)  # the square forgotten


my_tanh.defvjp(my_tanh_fwd, my_tanh_bwd)


def uses_my_tanh(params, x):
    h = my_tanh(x @ params["w"])
    return jnp.mean(h * 2.0, axis=-1)


@jax.custom_vjp
def doubled_exp(x):
    return jnp.exp(x)


doubled_exp.defvjp(lambda x: (jnp.exp(x), jnp.exp(x)), lambda y, g: (2.0 * g * y,))


def uses_doubled_exp(x):
    return jnp.sum(doubled_exp(x) * x)


@jax.custom_vjp
def cube(x):
    return x**3


cube.defvjp(lambda x: (x**3, x), lambda x, g: (3.0 * x**2 * g,))


def uses_cube(x):
    return jnp.sum(jnp.sin(cube(x)))


@jax.custom_jvp
def soft_clip(x):
    return 2.0 * jnp.tanh(x)


@soft_clip.defjvp
def soft_clip_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return soft_clip(x), 2.0 * (1 - jnp.tanh(x)) * t  # the square forgotten


def uses_soft_clip(x):
    return jnp.sum(soft_clip(1.5 * x))


# -- cuts -----------------------------------------------------------------------------------


def scaled_by_a_cut(x):
    scale = jax.lax.stop_gradient(jnp.sum(x**2))
    return jnp.tanh(x) * scale


# -- what cannot be traced ------------------------------------------------------------------


def branches(x):
    if x.sum() > 0:
        return x * 2
    return x


def to_numpy(x):
    return jnp.asarray(np.asarray(x) * 2)


def as_index(x):
    return x[int(x[0, 0] > 0)]


def through_fft(x):
    return jnp.abs(jnp.fft.fft(x))


def python_number(x):
    return 1.0


def integers(x):
    return jnp.argmax(x, axis=1)


def constant(x):
    return jnp.ones(3) * 2.0


def mismatched(x):
    return x @ jnp.ones((7, 2))


# -- what JAX wraps around ops: traced through ----------------------------------------------


@jax.jit
def jitted(x):
    return jnp.sin(x) * 2.0


def checkpointed(x):
    return jax.checkpoint(lambda v: jnp.tanh(v) ** 2)(x).sum()


def vmapped(x):
    return jax.vmap(lambda row: jnp.dot(row, row))(x)


def in_bfloat16(x):
    return jnp.exp(x).sum()  # JAX computes it in float32 and rounds back


def updated(x):
    return x.at[0].set(x[1] * 2.0).sum() + x.at[:, 1].add(3.0 * x[:, 0]).sum()
