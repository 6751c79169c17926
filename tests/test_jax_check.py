"""gradcheck.jax.check on real JAX functions: correct ones pass, every equation mapped onto
the registry and judged by TensorFlow and finite differences both; a wrong custom rule is
named at its node with its mechanism, a fix in JAX spelling and the user's line; a cut is
a finding only where it changes the gradient; what cannot be traced is refused, naming
the line and the alternative."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("tensorflow")

import jax.numpy as jnp  # noqa: E402

import gradcheck.jax as gj  # noqa: E402
from gradcheck.api.engines import relative  # noqa: E402
from gradcheck.tracing.program import TraceError  # noqa: E402

RNG = np.random.default_rng(7)


def normal(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape)


def line_of(fn, text: str) -> str:
    """``file:line`` of the line of `fn`'s source holding `text`, as hints name lines."""
    lines, start = inspect.getsourcelines(fn)
    found = next(k for k, line in enumerate(lines) if text in line)
    return f"{relative(inspect.getsourcefile(fn))}:{start + found}"


# -- a zoo of correct functions, one per family of mapped primitives ------------------------


def mlp(params, x):
    h = jax.nn.relu(jnp.einsum("bi,hi->bh", x, params["w1"]) + params["b1"])
    z = h @ params["w2"]
    return jnp.mean(jnp.sum((jax.nn.silu(z) + jax.nn.softplus(z)) ** 2, axis=-1))


def cnn(x, w, w2):
    y = jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    y = jnp.tanh(y)
    top = jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    mean = jax.lax.reduce_window(y, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") / 9.0
    nchw = jnp.transpose(top * mean, (0, 3, 1, 2))
    return jax.lax.conv(nchw, w2, (1, 2), [(1, 0), (0, 1)])  # NCHW and OIHW


def conv1d(x, w):
    dims = ("NWC", "WIO", "NWC")
    y = jax.lax.conv_general_dilated(x, w, (2,), [(1, 1)], rhs_dilation=(2,), dimension_numbers=dims,
                                     feature_group_count=2)  # fmt: skip
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
    return jnp.cumsum(x, axis=1) * jnp.cumprod(x, axis=0)[::-1] + jax.lax.cumsum(x, 0, reverse=True)


def layout(x):
    a, b = jnp.split(x, 2, axis=1)
    stacked = jnp.stack([a, jnp.tile(b[:, :1], (1, 3))], axis=0).reshape(2, -1)
    joined = jnp.concatenate([x[1:, ::2], x[:-1, 1::2] * 2.0], axis=0)
    zero = jnp.zeros((), x.dtype)
    interior = jax.lax.pad(x[:2, :3], zero, ((1, 2, 1), (0, 1, 0)))  # 6 x 4, as joined padded
    padded = jnp.pad(joined, ((0, 0), (1, 0))) + interior
    window = jax.lax.dynamic_slice(x, (1, 2), (2, 3))
    return (
        stacked.sum()
        + (padded**2).sum()
        + (jnp.squeeze(window[None, :2]).T * jnp.arange(2.0)).sum()
    )


def select(x, y):
    bent = jnp.where(x > 0, x, 0.1 * x) + jnp.maximum(x, y) * jnp.minimum(x, 2 * y)
    low, high = jnp.asarray(-0.5, y.dtype), jnp.asarray(0.5, y.dtype)
    return bent + jax.lax.clamp(low, y, high) + jnp.argmax(x, axis=1)[:, None] * 0.0


def gathers(x):
    rows, cols = np.array([[0, 1], [2, 0]]), np.array([[1, 1], [0, 3]])
    return (
        jnp.take(x, np.array([0, 2, 2]), axis=0).sum(0)
        + x[:, np.array([3, 0, 0, 1])][0]
        + x[rows, cols].sum()
    )


def elementwise(x, y):
    positive = jnp.abs(y) + 1.0
    return (jnp.exp(x) + jnp.log(positive) - jnp.sin(x) * jnp.cos(y) + jnp.tan(x * 0.3)
            + jax.scipy.special.erf(x) + jnp.log1p(positive) + jnp.expm1(y * 0.5) + jnp.sign(x) * x
            + jnp.square(y) + jax.lax.rsqrt(positive) + positive**1.5 + jax.nn.sigmoid(x)
            - x / positive + jnp.tanh(y) ** 3 + jnp.sqrt(positive) + 2.0**x)  # fmt: skip


def reductions(x):
    return jax.nn.logsumexp(x, axis=0) + jnp.max(x, axis=1).sum() + jnp.min(x) + jnp.prod(x[:2])


ZOO = {
    "mlp": (mlp, lambda: ({"w1": normal(6, 4), "b1": normal(6), "w2": normal(6, 3)}, normal(5, 4)),
            ["einsum(", " @ ", "relu(", "silu(", "softplus(", "sum("]),
    "cnn": (cnn, lambda: (normal(2, 6, 6, 3), normal(3, 3, 3, 4), normal(2, 4, 2, 2)),
            ["conv2d(", "max_pool2d(", "avg_pool2d(", "filter_format='OIHW'"]),
    "conv1d": (conv1d, lambda: (normal(2, 9, 4), normal(3, 2, 6)), ["conv1d(", "groups=2"]),
    "layer_norm": (layer_norm, lambda: (normal(4, 6), normal(6), normal(6)), ["sqrt(", "sum("]),
    "cross_entropy": (cross_entropy, lambda: (normal(5, 4),), ["take_along_axis(", "log("]),
    "cumulative": (cumulative, lambda: (normal(4, 5),), ["cumsum(", "cumprod(", "flip(", "reverse=True"]),
    "layout": (layout, lambda: (normal(4, 6),),
               ["split(", "stack(", "tile(", "concat(", "pad(", "dilate(", "transpose("]),
    "select": (select, lambda: (normal(3, 4), normal(3, 4)), ["where(", "maximum(", "minimum(", "clip("]),
    "gathers": (gathers, lambda: (normal(3, 4),), ["take("]),
    "elementwise": (elementwise, lambda: (normal(3, 4), normal(3, 4)),
                    [f"{op}(" for op in ("exp", "log", "sin", "cos", "tan", "erf", "log1p", "expm1",
                                         "sign", "square", "rsqrt", "sigmoid", "tanh", "sqrt")]),
    "reductions": (reductions, lambda: (normal(4, 5),), ["max(", "min(", "prod(", "exp("]),
}  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", list(ZOO))
def test_a_correct_function_passes_fully_mapped_against_tensorflow_and_finite_differences(
    case: str, dtype: type
) -> None:
    fn, make_args, ops = ZOO[case]
    args = jax.tree_util.tree_map(lambda a: a.astype(dtype), make_args())
    result = gj.check(fn, *args)
    assert result.passed, result.report()
    assert result.program.dtype == np.dtype(dtype).name
    assert not result.program.opaque, result.notes
    assert result.case.reference == "both"
    missing = [op for op in ops if op not in result.program.source]
    assert not missing, result.program.source


def test_the_inputs_are_the_float_leaves_named_by_their_pytree_paths() -> None:
    params = {"w": normal(3, 2), "b": normal(2), "steps": np.arange(2)}

    def model(params, x, scale):
        return jnp.tanh(x @ params["w"] + params["b"]) * scale + params["steps"]

    result = gj.check(model, params, normal(4, 3), 2.0)
    assert result.passed
    assert sorted(result.program.wrt) == ["params_b", "params_w", "x"]
    only_x = gj.check(model, params, normal(4, 3), 2.0, argnums=1)
    assert only_x.program.wrt == ["x"] and only_x.passed
    with_kwarg = gj.check(lambda x, w=None: jnp.sin(x @ w), normal(4, 3), w=normal(3, 2))
    assert with_kwarg.program.wrt == ["x"]  # keyword arguments are constants, as under jax.grad


def test_several_outputs_are_checked_as_one() -> None:
    result = gj.check(lambda x: (jnp.sin(x), {"sq": x**2}), normal(3, 2))
    assert result.passed
    assert any("checked as one" in note for note in result.notes)


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


def test_a_wrong_custom_vjp_is_named_at_its_node_with_the_formula_a_jax_fix_and_its_bwd() -> None:
    result = gj.check(uses_my_tanh, {"w": normal(4, 3)}, normal(5, 4))
    assert not result.passed
    top = result.case.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "my_tanh", "formula")
    assert "my_tanh(" in top.node and "g * (1 - y)" in top.message
    assert "jnp.tanh(x)**2" in top.fix  # the primal is tanh: the fix states its rule, in JAX
    assert line_of(my_tanh_bwd, "def my_tanh_bwd") in top.message
    assert line_of(uses_my_tanh, "h = my_tanh") in top.message


def test_a_custom_vjp_whose_bwd_scales_is_found_scaled() -> None:
    @jax.custom_vjp
    def my_exp(x):
        return jnp.exp(x)

    my_exp.defvjp(lambda x: (jnp.exp(x), jnp.exp(x)), lambda y, g: (2.0 * g * y,))
    result = gj.check(lambda x: jnp.sum(my_exp(x) * x), normal(3, 4))
    top = result.case.hints[0]
    assert (top.code, top.op, top.mechanism, top.factor) == ("op-vjp", "my_exp", "scaled", 2.0)


def test_a_correct_custom_vjp_passes_by_finite_differences_in_both_dtypes() -> None:
    @jax.custom_vjp
    def cube(x):
        return x**3

    cube.defvjp(lambda x: (x**3, x), lambda x, g: (3.0 * x**2 * g,))
    for dtype in (np.float64, np.float32):
        result = gj.check(lambda x: jnp.sum(jnp.sin(cube(x))), normal(3, 4).astype(dtype))
        assert result.passed, result.report()
        assert result.case.reference == "numeric" and list(result.program.opaque) == ["cube"]


@jax.custom_jvp
def soft_clip(x):
    return 2.0 * jnp.tanh(x)


@soft_clip.defjvp
def soft_clip_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return soft_clip(x), 2.0 * (1 - jnp.tanh(x)) * t  # the square forgotten


def test_a_users_custom_jvp_is_a_custom_rule_named_at_its_jvp() -> None:
    result = gj.check(lambda x: jnp.sum(soft_clip(1.5 * x)), normal(3, 4))
    top = result.case.hints[0]
    assert (top.code, top.op) == ("op-vjp", "soft_clip")
    assert line_of(soft_clip_jvp, "def soft_clip_jvp") in top.message


def test_a_primitive_no_registry_op_says_is_checked_by_finite_differences() -> None:
    result = gj.check(lambda x, y: jnp.sum(jnp.arctan2(x, y) ** 2), normal(3, 4), normal(3, 4))
    assert result.passed
    assert list(result.program.opaque) == ["lax_atan2"] and result.case.reference == "numeric"
    assert any("lax.atan2" in note and "finite differences" in note for note in result.notes)


# -- cuts -----------------------------------------------------------------------------------


def scaled_by_a_cut(x):
    scale = jax.lax.stop_gradient(jnp.sum(x**2))
    return jnp.tanh(x) * scale


def test_a_stop_gradient_that_changes_the_gradient_is_diagnosed_as_a_cut_at_its_line() -> None:
    result = gj.check(scaled_by_a_cut, normal(3, 4))
    top = result.case.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "stop_gradient", "zero")
    assert "jax.lax.stop_gradient" in top.message and "cuts the gradient" in top.message
    assert line_of(scaled_by_a_cut, "scale = jax.lax") in top.message


def test_logsumexps_shift_is_a_cut_that_changes_nothing_and_no_finding() -> None:
    result = gj.check(lambda x: jax.nn.logsumexp(x, axis=-1), normal(3, 4))
    assert result.passed and result.case.reference == "both"
    assert any("adds nothing to the gradient" in note for note in result.notes)


# -- forward mode and second order ----------------------------------------------------------


def test_forward_mode_and_second_order_are_checked_where_jax_does_them() -> None:
    result = gj.check(mlp, *ZOO["mlp"][1](), modes=["rev", "fwd"], order=2)
    assert result.passed
    assert result.case.jvp and all(c.status == "passed" for c in result.case.jvp)
    assert result.case.hvp and all(c.status == "passed" for c in result.case.hvp)


def test_a_custom_vjp_under_forward_mode_is_unsupported_in_jaxs_words_not_an_error() -> None:
    result = gj.check(uses_my_tanh, {"w": normal(4, 3)}, normal(5, 4), modes=["rev", "fwd"])
    assert result.case.status == "failed" and not result.case.jvp  # rev still checked
    assert "my_tanh (a jax.custom_vjp" in result.case.message
    assert "can't apply forward-mode autodiff" in result.case.message

    @jax.custom_vjp
    def double(x):
        return 2.0 * x

    double.defvjp(lambda x: (2.0 * x, None), lambda _, g: (2.0 * g,))
    correct = gj.check(lambda x: jnp.sum(double(x) ** 2), normal(3), modes=["rev", "fwd"])
    assert correct.case.status == "skipped" and "unsupported" in correct.case.message
    assert all(c.status == "passed" for c in correct.case.inputs)


# -- one process, many traces ---------------------------------------------------------------


def _sine(bug: bool):
    @jax.custom_vjp
    def sine(x):
        return jnp.sin(x)

    sine.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: ((2.0 if bug else 1.0) * g * jnp.cos(x),))
    return lambda x: jnp.sum(sine(x) * x)


def test_two_traces_of_one_structure_never_share_a_compiled_program() -> None:
    x = normal(3, 4)
    good, bad, good_again = (gj.check(_sine(bug), x) for bug in (False, True, False))
    assert good.program.source == bad.program.source == good_again.program.source
    assert good.passed and not bad.passed and good_again.passed


def test_assert_gradients_raises_led_by_the_top_hint() -> None:
    with pytest.raises(AssertionError, match="op-vjp"):
        gj.assert_gradients(scaled_by_a_cut, normal(3, 4))
    assert gj.assert_gradients(jnp.tanh, normal(3)).passed


# -- refusals -------------------------------------------------------------------------------


def branches(x):
    if x.sum() > 0:
        return x * 2
    return x


def to_numpy(x):
    return jnp.asarray(np.asarray(x) * 2)


def through_fft(x):
    return jnp.abs(jnp.fft.fft(x))


def python_number(x):
    return 1.0


def integers(x):
    return jnp.argmax(x, axis=1)


def constant(x):
    return jnp.ones(3) * 2.0


@pytest.mark.parametrize(
    ("fn", "line", "said"),
    [
        (branches, "if x.sum() > 0", "jnp.where or jax.lax.cond"),
        (to_numpy, "np.asarray(x)", "NumPy array"),
        (through_fft, "jnp.fft.fft", "complex"),
        (python_number, "def python_number", "float JAX arrays"),
        (integers, "jnp.argmax", "int64"),
        (constant, "def constant", "does not depend on any differentiated input"),
    ],
)
def test_what_cannot_be_traced_is_refused_naming_the_line_and_the_case_file(fn, line, said) -> None:
    with pytest.raises(TraceError) as refused:
        gj.check(fn, normal(3, 4))
    message = str(refused.value)
    assert line_of(fn, line) in message and said in message and "case file" in message
    # no traceback from JAX's tracing chained to it
    assert refused.value.__cause__ is None
    assert refused.value.__context__ is None or refused.value.__suppress_context__


def test_a_complex_argument_is_refused_naming_it() -> None:
    with pytest.raises(TraceError, match=r"z, an argument of .*complex.*case file"):
        gj.check(lambda z: z * 2, normal(3).astype(np.complex128))
