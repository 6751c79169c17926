"""Products and running sums (SPEC §3.1): prod, cumsum, cumprod.

Where a product meets a zero, the gradient is the product of the *other* factors, which
dividing the product by the factor cannot give (0 / 0). prod's VJP is TensorFlow's,
exact at zeros: each element's gradient is the product of the elements before it times
the product of those after it (two exclusive cumprods). cumprod's VJP here is exact at
zeros too; TensorFlow's divides by x, and is NaN or wrong there: the declaration says
so, and cases with zeros in cumprod's input are for the numeric reference.
"""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import normalize_axes, normalize_axis
from .reductions import REDUCE_ATTRS, _reduce_shape, spread
from .registry import Interval, Op, Shape, ShapeError, register

CUMULATIVE_ATTRS = {"axis": 0, "exclusive": False, "reverse": False}
_FLAGS = {"exclusive": (False, True), "reverse": (False, True)}  # what fuzzing tries


def _cumulative_shape(
    x: Shape, axis: object = 0, exclusive: object = False, reverse: object = False
) -> Shape:
    normalize_axis(axis, len(x))
    for name, value in (("exclusive", exclusive), ("reverse", reverse)):
        if not isinstance(value, bool):
            raise ShapeError(f"{name} must be true or false, got {value!r}")
    return x


def _cumulative(running, identity: float):
    """cumsum's or cumprod's forward: `running` (np.cumsum, np.cumprod) along `axis`,
    backwards when `reverse`, shifted by one (starting at `identity`) when `exclusive`."""

    def forward(x, axis, exclusive, reverse):
        x = np.asarray(x)
        if reverse:
            x = np.flip(x, axis)
        y = running(x, axis=axis)
        if exclusive:
            first = np.full_like(np.take(x, [0], axis=axis), identity)
            y = np.concatenate([first, np.take(y, range(x.shape[axis] - 1), axis=axis)], axis)
        return np.flip(y, axis) if reverse else y

    return forward


def _others_product(x, axes: tuple[int, ...]):
    """The product of the other elements of each reduced group, for every element."""
    kept = [a for a in range(x.ndim) if a not in axes]
    perm = kept + list(axes)
    moved = np.transpose(x, perm)
    flat = np.reshape(moved, (*moved.shape[: len(kept)], -1))
    others = CUMPROD(flat, axis=-1, exclusive=True) * CUMPROD(
        flat, axis=-1, exclusive=True, reverse=True
    )
    return np.transpose(np.reshape(others, moved.shape), np.argsort(perm))


def _prod_vjp(g, ans, x, axis, keepdims):
    return spread(g, x, axis, keepdims) * _others_product(x, normalize_axes(axis, x.ndim))


def _prod_jvp(t, ans, x, axis, keepdims):
    others = _others_product(x, normalize_axes(axis, x.ndim))
    return np.sum(t * others, axis=normalize_axes(axis, x.ndim), keepdims=keepdims)


def _first_zero(x, axis, reverse):
    """Where each run (along `axis`, in the direction of the running product) meets its
    first zero: a constant mask, as comparisons are on the builtin engine's Tensors."""
    zeros = np.equal(x, 0)
    return zeros, zeros & np.equal(CUMSUM(zeros.astype(np.int64), axis=axis, reverse=reverse), 1)


def _cumprod_vjp(g, ans, x, axis, exclusive, reverse):
    # Away from zeros: cumsum(g * y) backwards, divided by x (TensorFlow's rule). At a
    # run's first zero that is 0 / 0: its gradient is the same sum over the products
    # with that zero replaced by 1. Past it, every product holds the zero: 0 (0 / 1).
    zeros, first = _first_zero(x, axis, reverse)
    back = {"axis": axis, "exclusive": exclusive, "reverse": not reverse}
    skipped = CUMPROD(np.where(first, 1, x), axis=axis, exclusive=exclusive, reverse=reverse)
    return np.where(
        first, CUMSUM(g * skipped, **back), CUMSUM(g * ans, **back) / np.where(zeros, 1, x)
    )


def _cumprod_jvp(t, ans, x, axis, exclusive, reverse):
    # Before a run's first zero: y * cumsum(t / x). From it on (past it, if exclusive),
    # only the zero's own tangent moves the products: t there times the products with
    # the zero replaced by 1.
    zeros, first = _first_zero(x, axis, reverse)
    attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
    skipped = CUMPROD(np.where(first, 1, x), **attrs)
    reached = CUMSUM(zeros.astype(np.int64), **attrs) >= 1
    at_zero = np.sum(t * first, axis=axis, keepdims=True)
    return np.where(reached, at_zero * skipped, ans * CUMSUM(t / np.where(zeros, 1, x), **attrs))


def _tf_cumprod_wrong(x, axis, exclusive, reverse) -> str | None:
    if not np.any(np.equal(x, 0)):
        return None
    return "TensorFlow's cumprod gradient divides by x, and x holds zeros"


_RUN = "axis=axis, exclusive=exclusive, reverse={0}"
_PROD = (
    "p = [d for d in range(x.ndim) if d not in axis] + list(axis); m = np.transpose(x, p); "
    "f = m.reshape(*m.shape[: x.ndim - len(axis)], -1); "
    "o = cumprod(f, axis=-1, exclusive=True) * cumprod(f, axis=-1, exclusive=True, reverse=True); "
    "o = np.transpose(o.reshape(m.shape), np.argsort(p)); "
)
_TF_PROD = (
    "p = [d for d in range(x.shape.rank) if d not in axis] + list(axis); m = tf.transpose(x, p); "
    "f = tf.reshape(m, m.shape[: x.shape.rank - len(axis)].as_list() + [-1]); "
    "o = tf.math.cumprod(f, -1, exclusive=True) * tf.math.cumprod(f, -1, exclusive=True, "
    "reverse=True); o = tf.transpose(tf.reshape(o, m.shape), tf.math.invert_permutation(p)); "
)
# PyTorch and JAX have no exclusive cumprod: a ones column shifted in; their argsort
# takes no list: the inverse permutation in Python.
_OTHERS_PROD = (
    "p = [d for d in range(x.ndim) if d not in axis] + list(axis); m = {perm}(x, p); "
    "f = m.reshape(*m.shape[: x.ndim - len(axis)], -1); one = {lib}.ones_like(f[..., :1]); "
    "o = {lib}.cumprod({cat}([one, f[..., :-1]], -1), -1) * {lib}.flip({lib}.cumprod("
    "{cat}([one, {lib}.flip(f, (-1,))[..., :-1]], -1), -1), (-1,)); "
    "o = {perm}(o.reshape(m.shape), [p.index(k) for k in range(x.ndim)]); "
)
_TORCH_PROD = _OTHERS_PROD.format(perm="torch.permute", lib="torch", cat="torch.cat")
_JAX_PROD = _OTHERS_PROD.format(perm="jnp.transpose", lib="jnp", cat="jnp.concatenate")
# torch.cumsum has neither reverse nor exclusive: flipped, and the element taken off.
_TORCH_RUN = "torch.flip(torch.cumsum(torch.flip({0}, (axis,)), axis), (axis,))"

_FIRST = (
    "z = x == 0; first = z & (cumsum(z.astype(int), axis=axis, reverse=reverse) == 1); "
    "s = cumprod(np.where(first, 1, x), axis=axis, exclusive=exclusive, reverse=reverse); "
)
_TF_FIRST = (
    "z = tf.cast(x == 0, tf.int32); first = (z == 1) & (tf.math.cumsum(z, axis, reverse=reverse) "
    "== 1); s = tf.math.cumprod(tf.where(first, tf.ones_like(x), x), axis, exclusive=exclusive, "
    "reverse=reverse); "
)
_TF_CUMPROD_VJP = _TF_FIRST + (
    "tf.where(first, tf.math.cumsum(g * s, axis, exclusive=exclusive, reverse=not reverse), "
    "tf.math.cumsum(g * y, axis, exclusive=exclusive, reverse=not reverse) "
    "/ tf.where(z == 1, tf.ones_like(x), x))"
)
_TF_CUMPROD_JVP = _TF_FIRST + (
    "reached = tf.math.cumsum(z, axis, exclusive=exclusive, reverse=reverse) >= 1; "
    "tf.where(reached, tf.reduce_sum(t * tf.cast(first, t.dtype), axis, keepdims=True) * s, "
    "y * tf.math.cumsum(t / tf.where(z == 1, tf.ones_like(x), x), axis, exclusive=exclusive, "
    "reverse=reverse))"
)


# cumprod in PyTorch and JAX: the axis moved last and, for reverse, flipped, so that the
# rule is the forward one along -1 (torch.cumsum has neither reverse nor exclusive).
_OTHERS_CUMPROD = (
    "X, Y, U = ({lib}.moveaxis({lib}.flip(v, (axis,)) if reverse else v, axis, -1) "
    "for v in (x, y, {u})); z = X == 0; first = z & ({lib}.cumsum(z * 1, -1) == 1); "
    "W = {lib}.where(first, 1, X); one = {lib}.ones_like(W[..., :1]); "
    "s = {lib}.cumprod({cat}([one, W[..., :-1]], -1) if exclusive else W, -1); "
)
_TORCH_CUMPROD, _JAX_CUMPROD = (
    _OTHERS_CUMPROD.format(lib=lib, cat=cat, u="{u}")
    for lib, cat in (("torch", "torch.cat"), ("jnp", "jnp.concatenate"))
)
_BACK = "{0}.flip({0}.moveaxis(r, -1, axis), (axis,)) if reverse else {0}.moveaxis(r, -1, axis)"
_CUMPROD_VJP = (
    "run = lambda v: {0}.flip({0}.cumsum({0}.flip(v, (-1,)), -1), (-1,)) "
    "- (v if exclusive else 0); "
    "r = {0}.where(first, run(U * s), run(U * Y) / {0}.where(z, 1, X)); " + _BACK
)
_CUMPROD_JVP = (
    "run = lambda v: {0}.cumsum(v, -1) - (v if exclusive else 0); "
    "r = {0}.where(run(z * 1) >= 1, {0}.sum(U * first, -1, {1}=True) * s, "
    "Y * run(U / {0}.where(z, 1, X))); " + _BACK
)


def _tf_run(name: str):
    def build(tf, x, axis, exclusive, reverse):
        return getattr(tf.math, name)(x, axis, exclusive=exclusive, reverse=reverse)

    return build


# The declarations are a table, laid out by hand: one op per block.
# fmt: off
register(Op(
    name="prod", params=("x",), attrs=REDUCE_ATTRS, shape=_reduce_shape,
    forward=lambda x, axis, keepdims: np.asarray(
        np.prod(x, axis=normalize_axes(axis, np.ndim(x)), keepdims=keepdims)
    ),
    vjps=(_prod_vjp,),
    tf=lambda tf, x, axis, keepdims: tf.reduce_prod(x, axis=axis, keepdims=keepdims),
    tf_name="tf.reduce_prod",
    doc="product over axis; exact at zeros, as TensorFlow's (the others' product)",
    rules=(_PROD + "np.broadcast_to(g.reshape(kept_shape), x.shape) * o",),
    tf_rules=(_TF_PROD + "tf.reshape(g, kept_shape) * o",),
    jvps=(_prod_jvp,),
    jvp_rules=(_PROD + "np.sum(t * o, axis, keepdims=keepdims)",),
    tf_jvp_rules=(_TF_PROD + "tf.reduce_sum(t * o, axis, keepdims=keepdims)",),
    torch_rules=(_TORCH_PROD + "torch.broadcast_to(g.reshape(kept_shape), x.shape) * o",),
    torch_jvp_rules=(_TORCH_PROD + "torch.sum(t * o, axis, keepdim=keepdims)",),
    jax_rules=(_JAX_PROD + "jnp.broadcast_to(g.reshape(kept_shape), x.shape) * o",),
    jax_jvp_rules=(_JAX_PROD + "jnp.sum(t * o, axis, keepdims=keepdims)",),
    zeros=True,
))
CUMSUM = register(Op(
    name="cumsum", params=("x",), attrs=CUMULATIVE_ATTRS, shape=_cumulative_shape,
    forward=_cumulative(lambda x, axis: np.cumsum(x, axis=axis), 0),
    vjps=(lambda g, ans, x, axis, exclusive, reverse: CUMSUM(
        g, axis=axis, exclusive=exclusive, reverse=not reverse
    ),),
    tf=_tf_run("cumsum"), tf_name="tf.math.cumsum",
    doc="running sum along axis (exclusive: of the elements before; reverse: from the end)",
    rules=(f"cumsum(g, {_RUN.format('not reverse')})",),
    tf_rules=("tf.math.cumsum(g, axis, exclusive=exclusive, reverse=not reverse)",),
    jvps=(lambda t, ans, x, axis, exclusive, reverse: CUMSUM(
        t, axis=axis, exclusive=exclusive, reverse=reverse
    ),),
    jvp_rules=(f"cumsum(t, {_RUN.format('reverse')})",),
    tf_jvp_rules=("tf.math.cumsum(t, axis, exclusive=exclusive, reverse=reverse)",),
    torch_rules=(f"c = torch.cumsum(g, axis) if reverse else {_TORCH_RUN.format('g')}; "
                 "c - g if exclusive else c",),
    torch_jvp_rules=(f"c = {_TORCH_RUN.format('t')} if reverse else torch.cumsum(t, axis); "
                     "c - t if exclusive else c",),
    # XLA takes no negative axis.
    jax_rules=("c = jax.lax.cumsum(g, axis % g.ndim, reverse=not reverse); "
               "c - g if exclusive else c",),
    jax_jvp_rules=("c = jax.lax.cumsum(t, axis % t.ndim, reverse=reverse); "
                   "c - t if exclusive else c",),
    attr_choices=_FLAGS,
))
CUMPROD = register(Op(
    name="cumprod", params=("x",), attrs=CUMULATIVE_ATTRS, shape=_cumulative_shape,
    forward=_cumulative(lambda x, axis: np.cumprod(x, axis=axis), 1),
    vjps=(_cumprod_vjp,),
    tf=_tf_run("cumprod"), tf_name="tf.math.cumprod",
    doc="running product along axis; its gradient is exact at zeros, TensorFlow's is not "
        "(it divides by x): cases with zeros are judged by the numeric reference",
    rules=(_FIRST + "np.where(first, cumsum(g * s, " + _RUN.format("not reverse") + "), "
           "cumsum(g * y, " + _RUN.format("not reverse") + ") / np.where(z, 1, x))",),
    tf_rules=(_TF_CUMPROD_VJP,),
    jvps=(_cumprod_jvp,),
    jvp_rules=(_FIRST + "reached = cumsum(z.astype(int), " + _RUN.format("reverse") + ") >= 1; "
               "np.where(reached, np.sum(t * first, axis, keepdims=True) * s, "
               "y * cumsum(t / np.where(z, 1, x), " + _RUN.format("reverse") + "))",),
    tf_jvp_rules=(_TF_CUMPROD_JVP,),
    torch_rules=(_TORCH_CUMPROD.format(u="g") + _CUMPROD_VJP.format("torch"),),
    torch_jvp_rules=(_TORCH_CUMPROD.format(u="t") + _CUMPROD_JVP.format("torch", "keepdim"),),
    jax_rules=(_JAX_CUMPROD.format(u="g") + _CUMPROD_VJP.format("jnp"),),
    jax_jvp_rules=(_JAX_CUMPROD.format(u="t") + _CUMPROD_JVP.format("jnp", "keepdims"),),
    tf_wrong=_tf_cumprod_wrong,
    # Away from zeros when fuzzing: TensorFlow's gradient is wrong there (tf_wrong).
    domain={"x": Interval(gap=0.25)}, attr_choices=_FLAGS,
))
# fmt: on
