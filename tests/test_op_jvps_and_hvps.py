"""Every registered op in forward mode and at second order, on `test_ops`'s table of cases.

* Each JVP (broadcast to the output's shape, as the builtin engine does) against
  TensorFlow's `tf.autodiff.ForwardAccumulator` and against central finite differences
  of the NumPy forward along the tangent.
* The builtin engine's second order (its VJPs run on its own Tensors with
  ``create_graph=True``, then differentiated again: a Hessian-vector product) against
  TensorFlow's nested `GradientTape`s and against central finite differences of the
  registry's first-order VJPs along the direction.

Everything in float64; tangents, cotangents and directions are random normal.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.ops import Op, get_op
from test_ops import (
    FD_STEP,
    FD_TOL,
    PARAMS,
    TF_TOL,
    Case,
    _args,
    differentiable,
    each_output,
    is_integer,
    op_forward,
    op_vjp,
    random_cotangent,
)

ZERO = tf.UnconnectedGradients.ZERO


def tf_args(args) -> list:
    """The arguments as TensorFlow constants: float64, integer ones (indices) as they are."""
    return [tf.constant(a) if is_integer(a) else tf.constant(a, dtype=tf.float64) for a in args]


def call_tf(op: Op, xs: list, attrs: dict):
    return op.tf(tf, xs, **attrs) if op.variadic else op.tf(tf, *xs, **attrs)


def op_jvp(op: Op, i: int, t: np.ndarray, ans, args, attrs) -> list[np.ndarray]:
    """Argument i's share of each output's tangent, in that output's shape (one output for
    most ops; split's several)."""
    if op.variadic:
        raw = op.jvps[0](t, ans, list(args), i, **attrs)
    else:
        raw = op.jvps[i](t, ans, *args, **attrs)
    raws = list(raw) if op.multi else [raw]
    outs = each_output(ans)
    assert len(raws) == len(outs)
    return [np.broadcast_to(np.asarray(r), a.shape) for r, a in zip(raws, outs, strict=True)]


@pytest.mark.parametrize("case", PARAMS)
def test_each_jvp_matches_the_forward_accumulator_and_finite_differences(case: Case) -> None:
    op, attrs, args, rng = _args(case)
    ans = op_forward(op, args, attrs)
    for i in differentiable(op, args):
        arg = args[i]
        t = rng.standard_normal(arg.shape)
        if not op.variadic and op.params[i] in op.symmetric:  # cholesky: symmetric moves only
            t = (t + np.swapaxes(t, -1, -2)) / 2
        got = op_jvp(op, i, t, ans, args, attrs)
        xs = tf_args(args)
        with tf.autodiff.ForwardAccumulator(xs[i], tf.constant(t, dtype=tf.float64)) as acc:
            out = call_tf(op, xs, attrs)
        outs = list(out) if op.multi else [out]
        for k, (mine, o) in enumerate(zip(got, outs, strict=True)):
            theirs = acc.jvp(o, unconnected_gradients=ZERO)
            np.testing.assert_allclose(mine, theirs, **TF_TOL, err_msg=f"output {k}")
        plus, minus = list(args), list(args)
        plus[i], minus[i] = arg + FD_STEP * t, arg - FD_STEP * t
        ups = each_output(op_forward(op, plus, attrs))
        downs = each_output(op_forward(op, minus, attrs))
        for k, (mine, u, d) in enumerate(zip(got, ups, downs, strict=True)):
            np.testing.assert_allclose(
                mine, (u - d) / (2 * FD_STEP), **FD_TOL, err_msg=f"output {k}"
            )


def builtin_hvp(op: Op, args, attrs, cotangent, directions) -> list[np.ndarray]:
    """The builtin engine's gradient of sum(grad * v), its first-order gradients built as
    Tensors (create_graph); integer arguments are constants."""
    engine = BuiltinEngine()
    built = [
        engine.constant(a) if is_integer(a) else engine.leaf(f"a{i}", a) for i, a in enumerate(args)
    ]
    leaves = [built[i] for i in differentiable(op, args)]
    out = engine.apply(op, built, attrs)
    if op.multi:  # several outputs: the VJP of sum(out_k * cotangent_k) over them
        terms = [
            engine.sum(engine.mul(o, engine.constant(c)), **SUM)
            for o, c in zip(out, cotangent, strict=True)
        ]
        out, cotangent = terms[0], 1.0
        for term in terms[1:]:
            out = engine.add(out, term)
    grads = engine.grad(out, leaves, cotangent, create_graph=True)
    terms = [engine.mul(g, engine.constant(v)) for g, v in zip(grads, directions, strict=True)]
    loss = engine.sum(terms[0], **SUM)
    for term in terms[1:]:
        loss = engine.add(loss, engine.sum(term, **SUM))
    return engine.grad(loss, leaves, 1.0)


SUM = {"axis": None, "keepdims": False}


def tf_hvp(op: Op, args, attrs, cotangent, directions) -> list[np.ndarray]:
    built = tf_args(args)
    xs = [built[i] for i in differentiable(op, args)]
    with tf.GradientTape() as outer:
        outer.watch(xs)
        with tf.GradientTape() as inner:
            inner.watch(xs)
            out = call_tf(op, built, attrs)
        outs = list(out) if op.multi else [out]
        cots = [tf.constant(c) for c in each_output(cotangent)]
        grads = inner.gradient(outs, xs, output_gradients=cots, unconnected_gradients=ZERO)
        grads = [tf.convert_to_tensor(g) for g in grads]  # a gather's come as IndexedSlices
        loss = tf.add_n([tf.reduce_sum(g * v) for g, v in zip(grads, directions, strict=True)])
    hvps = outer.gradient(loss, xs, unconnected_gradients=ZERO)
    return [tf.convert_to_tensor(g).numpy() for g in hvps]


def fd_hvp(op: Op, args, attrs, cotangent, directions) -> list[np.ndarray]:
    """d/dh of the registry's first-order VJPs at args + h * directions."""

    floats = differentiable(op, args)

    def vjps(h: float) -> list[np.ndarray]:
        moved = list(args)
        for i, v in zip(floats, directions, strict=True):
            moved[i] = args[i] + h * v
        ans = op_forward(op, moved, attrs)
        return [op_vjp(op, i, cotangent, ans, moved, attrs) for i in floats]

    plus, minus = vjps(FD_STEP), vjps(-FD_STEP)
    return [(p - m) / (2 * FD_STEP) for p, m in zip(plus, minus, strict=True)]


def _has_gradient(op: Op) -> bool:
    return op.variadic or any(p not in op.integer for p in op.params)


# one_hot's only input is integer: it has no gradient to differentiate again.
SECOND_ORDER = [p for p in PARAMS if _has_gradient(get_op(p.values[0].op))]


@pytest.mark.parametrize("case", SECOND_ORDER)
def test_the_builtin_second_order_matches_nested_tapes_and_finite_differences(case: Case) -> None:
    op, attrs, args, rng = _args(case)
    ans = op_forward(op, args, attrs)
    cotangent = random_cotangent(rng, ans)
    directions = [rng.standard_normal(args[i].shape) for i in differentiable(op, args)]
    for k, i in enumerate(differentiable(op, args)):
        if not op.variadic and op.params[i] in op.symmetric:  # cholesky: symmetric moves only
            directions[k] = (directions[k] + np.swapaxes(directions[k], -1, -2)) / 2
    got = builtin_hvp(op, args, attrs, cotangent, directions)
    for mine, theirs in zip(got, tf_hvp(op, args, attrs, cotangent, directions), strict=True):
        np.testing.assert_allclose(mine, theirs, **TF_TOL)
    for mine, fd in zip(got, fd_hvp(op, args, attrs, cotangent, directions), strict=True):
        np.testing.assert_allclose(mine, fd, **FD_TOL)
