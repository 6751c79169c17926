"""gradcheck.jax.check on real JAX: correct functions pass, every equation mapped onto the
registry and judged by TensorFlow and finite differences both; a wrong custom rule is
named at its node with its mechanism, a fix in JAX spelling and the user's line; a cut is
a finding only where it changes the gradient; what cannot be traced is refused, naming
the line and the alternative; a check is saved as a case file that runs as it says."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

import gradcheck  # noqa: E402
import gradcheck.jax as gj  # noqa: E402
import traced_jax_functions as tj  # noqa: E402
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


# -- correct functions pass, every equation mapped ------------------------------------------

ELEMENTWISE = ("exp", "log", "sin", "cos", "tan", "erf", "log1p", "expm1", "sign", "square",
               "rsqrt", "sigmoid", "tanh", "sqrt")  # fmt: skip
ZOO = {
    "mlp": (lambda: ({"w1": normal(6, 4), "b1": normal(6), "w2": normal(6, 3)}, normal(5, 4)),
            ["einsum(", " @ ", "relu(", "silu(", "softplus("]),
    "cnn": (lambda: (normal(2, 6, 6, 3), normal(3, 3, 3, 4), normal(2, 4, 2, 2)),
            ["conv2d(", "max_pool2d(", "avg_pool2d(", "filter_format='OIHW'"]),
    "conv1d": (lambda: (normal(2, 9, 4), normal(3, 2, 6)), ["conv1d(", "groups=2"]),
    "layer_norm": (lambda: (normal(4, 6), normal(6), normal(6)), ["sqrt(", "sum("]),
    "cross_entropy": (lambda: (normal(5, 4),), ["take_along_axis(", "log("]),
    "cumulative": (lambda: (normal(4, 5),), ["cumsum(", "cumprod(", "flip(", "reverse=True"]),
    "layout": (lambda: (normal(4, 6),),
               ["split(", "stack(", "tile(", "concat(", "pad(", "dilate(", "transpose("]),
    "select": (lambda: (normal(3, 4), normal(3, 4)), ["where(", "maximum(", "minimum(", "clip("]),
    "gathers": (lambda: (normal(3, 4),), ["take("]),
    "elementwise": (lambda: (normal(3, 4), normal(3, 4)), [f"{op}(" for op in ELEMENTWISE]),
    "reductions": (lambda: (normal(4, 5),), ["max(", "min(", "prod(", "exp("]),
}  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", list(ZOO))
def test_correct_code_passes_every_equation_mapped_against_tensorflow_and_finite_differences(
    name: str, dtype: type
) -> None:
    pytest.importorskip("tensorflow")
    make_args, ops = ZOO[name]
    args = jax.tree_util.tree_map(lambda a: a.astype(dtype), make_args())
    result = gj.check(getattr(tj, name), *args, reference="both")
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
    assert only_x.passed and only_x.program.wrt == ["x"]
    with_kwarg = gj.check(lambda x, w=None: jnp.sin(x @ w), normal(4, 3), w=normal(3, 2))
    assert with_kwarg.program.wrt == ["x"]  # keyword arguments are constants, as under jax.grad


def test_several_outputs_are_checked_as_one() -> None:
    result = gj.check(lambda x: (jnp.sin(x), {"sq": x**2}), normal(3, 2))
    assert result.passed
    assert any("checked as one" in note for note in result.notes)


WRAPPED = {"jit": (tj.jitted, "float64"), "checkpoint": (tj.checkpointed, "float64"),
           "vmap": (tj.vmapped, "float64"), "bfloat16": (tj.in_bfloat16, "bfloat16")}  # fmt: skip


@pytest.mark.parametrize("name", list(WRAPPED))
def test_what_jax_wraps_around_ops_is_traced_through(name: str) -> None:
    fn, dtype = WRAPPED[name]
    result = gj.check(fn, normal(3, 4).astype(jnp.dtype(dtype)))
    assert result.passed, result.report()
    assert not result.program.opaque and result.program.dtype == jnp.dtype(dtype).name


def test_a_primitive_no_registry_op_says_is_checked_by_finite_differences() -> None:
    result = gj.check(lambda x, y: jnp.sum(jnp.arctan2(x, y) ** 2), normal(3, 4), normal(3, 4))
    assert result.passed
    assert list(result.program.opaque) == ["lax_atan2"] and result.case.reference == "numeric"
    assert any("lax.atan2" in note and "finite differences" in note for note in result.notes)
    updated = gj.check(tj.updated, normal(3, 4))  # x.at[...]: scatters
    assert updated.passed and set(updated.program.opaque) == {"lax_scatter", "lax_scatter_add"}


# -- custom rules ---------------------------------------------------------------------------


def test_a_wrong_custom_vjp_is_named_at_its_node_with_the_formula_a_jax_fix_and_its_bwd() -> None:
    result = gj.check(tj.uses_my_tanh, {"w": normal(4, 3)}, normal(5, 4))
    assert not result.passed
    top = result.case.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "my_tanh", "formula")
    assert "my_tanh(" in top.node and "g * (1 - y)" in top.message
    assert "jnp.tanh(x)**2" in top.fix  # its primal is tanh: the fix states tanh's rule
    assert line_of(tj.my_tanh_bwd, "def my_tanh_bwd") in top.message
    assert line_of(tj.uses_my_tanh, "h = my_tanh") in top.message


def test_a_custom_vjp_whose_bwd_doubles_is_found_scaled() -> None:
    top = gj.check(tj.uses_doubled_exp, normal(3, 4)).case.hints[0]
    assert (top.code, top.op, top.mechanism, top.factor) == ("op-vjp", "doubled_exp", "scaled", 2.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_correct_custom_vjp_passes_by_finite_differences(dtype: type) -> None:
    result = gj.check(tj.uses_cube, normal(3, 4).astype(dtype))
    assert result.passed, result.report()
    assert result.case.reference == "numeric" and list(result.program.opaque) == ["cube"]


def test_a_users_custom_jvp_is_a_custom_rule_named_at_its_jvp() -> None:
    top = gj.check(tj.uses_soft_clip, normal(3, 4)).case.hints[0]
    assert (top.code, top.op) == ("op-vjp", "soft_clip")
    assert line_of(tj.soft_clip_jvp, "def soft_clip_jvp") in top.message


# -- cuts -----------------------------------------------------------------------------------


def test_a_stop_gradient_that_changes_the_gradient_is_diagnosed_as_a_cut_at_its_line() -> None:
    top = gj.check(tj.scaled_by_a_cut, normal(3, 4)).case.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "stop_gradient", "zero")
    assert "jax.lax.stop_gradient" in top.message and "cuts the gradient" in top.message
    assert line_of(tj.scaled_by_a_cut, "scale = jax.lax") in top.message


def test_logsumexps_shift_is_a_cut_that_changes_nothing_and_no_finding() -> None:
    result = gj.check(tj.stable_logsumexp, normal(3, 4))
    assert result.passed and not result.program.opaque
    assert any("adds nothing to the gradient" in note for note in result.notes)


# -- forward mode and second order ----------------------------------------------------------


def test_forward_mode_and_second_order_are_checked_where_jax_does_them() -> None:
    result = gj.check(tj.mlp, *ZOO["mlp"][0](), modes=["rev", "fwd"], order=2)
    assert result.passed
    assert result.case.jvp and all(c.status == "passed" for c in result.case.jvp)
    assert result.case.hvp and all(c.status == "passed" for c in result.case.hvp)


def test_a_custom_vjp_under_forward_mode_is_unsupported_in_jaxs_words_not_an_error() -> None:
    wrong = gj.check(tj.uses_my_tanh, {"w": normal(4, 3)}, normal(5, 4), modes=["rev", "fwd"])
    assert wrong.case.status == "failed" and not wrong.case.jvp  # reverse mode still checked
    assert "my_tanh (a jax.custom_vjp" in wrong.case.message
    assert "can't apply forward-mode autodiff" in wrong.case.message
    right = gj.check(tj.uses_cube, normal(3, 4), modes=["rev", "fwd"])
    assert right.case.status == "skipped" and "unsupported" in right.case.message
    assert all(c.status == "passed" for c in right.case.inputs)


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
    with pytest.raises(AssertionError, match=r"^scaled_by_a_cut: gradients failed\. op-vjp: "):
        gj.assert_gradients(tj.scaled_by_a_cut, normal(3, 4))
    assert gj.assert_gradients(jnp.tanh, normal(3)).passed
    assert gradcheck.jax.check is gj.check


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "line", "said"),
    [
        (tj.branches, "if x.sum() > 0", "jnp.where or jax.lax.cond"),
        (tj.to_numpy, "np.asarray(x)", "to a NumPy array"),
        (tj.as_index, "int(x[0, 0] > 0)", "as a Python value"),
        (tj.through_fft, "jnp.fft.fft", "complex128"),
        (tj.python_number, "def python_number", "float JAX arrays"),
        (tj.integers, "jnp.argmax", "int64"),
        (tj.constant, "def constant", "does not depend on any differentiated input"),
    ],
    ids=["branch", "numpy", "index", "complex", "number", "integers", "constant"],
)
def test_what_cannot_be_traced_is_refused_naming_the_line_and_the_case_file(fn, line, said):
    with pytest.raises(TraceError) as refused:
        gj.check(fn, normal(3, 4))
    message = str(refused.value)
    assert line_of(fn, line) in message and said in message and "case file" in message
    # no traceback from JAX's tracing chained to it
    assert refused.value.__cause__ is None
    assert refused.value.__context__ is None or refused.value.__suppress_context__


def test_a_function_that_raises_when_traced_is_refused_at_its_own_line() -> None:
    with pytest.raises(gradcheck.GradcheckError, match="mismatched raised TypeError at") as e:
        gj.check(tj.mismatched, normal(3, 4))
    assert line_of(tj.mismatched, "x @ jnp.ones") in str(e.value)


def test_a_complex_argument_is_refused_naming_it() -> None:
    with pytest.raises(TraceError, match=r"z, an argument of .*complex.*case file"):
        gj.check(lambda z: z * 2, normal(3).astype(np.complex128))


# -- saved as a case file -------------------------------------------------------------------


def test_a_saved_check_runs_as_printed_and_says_the_same(tmp_path) -> None:
    import os
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    result = gj.check(tj.uses_my_tanh, {"w": normal(4, 3)}, normal(5, 4))
    ops, case = result.save_case(tmp_path / "uses_my_tanh.yaml")
    command = case.read_text().splitlines()[1].lstrip("# ")
    assert command == f"gradcheck run {case} --ops {ops} --engine {ops}:Engine"
    ran = gradcheck.run(str(case), engine=f"{ops}:Engine", ops=[str(ops)], cache=False)
    mine, theirs = result.hints[0], ran.cases[0].hints[0]
    assert (theirs.code, theirs.op, theirs.mechanism, theirs.got_rule) == (
        mine.code, mine.op, mine.mechanism, mine.got_rule
    )  # fmt: skip
    argv = [sys.executable, "-m", *shlex.split(command)]  # `python -m gradcheck run ...`
    # the gradcheck this process runs, wherever the test is run from
    path = os.pathsep.join(
        [str(Path(gradcheck.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    )
    printed = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, check=False,
                             env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    assert printed.returncode == 1, printed.stderr
    assert "my_tanh's VJP for argument 0" in printed.stdout


def test_a_saved_check_with_nothing_opaque_needs_no_ops_file(tmp_path) -> None:
    pytest.importorskip("tensorflow")
    result = gj.check(tj.layer_norm, normal(4, 6), normal(6), normal(6), seed=7)
    (case,) = result.save_case(tmp_path / "layer_norm.yaml")
    text = case.read_text()
    assert "--engine jax" in text.splitlines()[1] and "seed: 7" in text
    ran = gradcheck.run(str(case), engine="jax", cache=False)
    assert ran.passed and ran.cases[0].case.reference == "tensorflow"


def test_a_saved_cut_keeps_its_cut(tmp_path) -> None:
    ops, case = gj.check(tj.scaled_by_a_cut, normal(3, 4)).save_case(tmp_path / "cut.yaml")
    assert "stops=('stop_gradient',)" in ops.read_text()
    ran = gradcheck.run(str(case), engine=f"{ops}:Engine", ops=[str(ops)], cache=False)
    top = ran.cases[0].hints[0]
    assert (top.op, top.mechanism) == ("stop_gradient", "zero")


def test_a_custom_rule_defined_in_a_function_cannot_be_saved_and_says_so(tmp_path) -> None:
    result = gj.check(_sine(True), normal(3, 4))
    with pytest.raises(TraceError, match="define the custom rule at the top of a module"):
        result.save_case(tmp_path / "sine.yaml")
