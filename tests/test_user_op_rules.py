"""User-defined ops' rule texts and JVPs (SPEC §9, and forward mode and second order):
the texts a declaration gives (`rules`, `tf_rules`, `jvp_rules`, `tf_jvp_rules`, and the
PyTorch and JAX ones, `torch_rules`, `jax_rules`, `torch_jvp_rules`, `jax_jvp_rules`) are the
rules a fix states, and compute what its VJPs and JVPs do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.ops.user import load_ops_files
from gradcheck.runner import RunOptions, check_case
from test_user_ops import SMOOTH_RELU_OPS, load_case, write


def test_the_example_declares_its_rules_in_both_spellings_and_modes() -> None:
    (smooth_relu,) = load_ops_files([SMOOTH_RELU_OPS])
    assert smooth_relu.rule(0) == "g * (1 - np.exp(-y))"
    assert smooth_relu.rule(0, "tensorflow") == "g * tf.sigmoid(x)"
    assert smooth_relu.rule(0, mode="fwd") == "t * (1 - np.exp(-y))"
    assert smooth_relu.rule(0, "tensorflow", "fwd") == "t * tf.sigmoid(x)"
    assert smooth_relu.rule(0, "torch") == "g * torch.sigmoid(x)"
    assert smooth_relu.rule(0, "jax", "fwd") == "t * jax.nn.sigmoid(x)"


def test_the_example_rule_texts_compute_its_vjp_and_jvp() -> None:
    import jax
    import jax.numpy as jnp
    import tensorflow as tf
    import torch

    jax.config.update("jax_enable_x64", True)

    (smooth_relu,) = load_ops_files([SMOOTH_RELU_OPS])
    rng = np.random.default_rng(5)
    x, g, t = (rng.standard_normal((3, 4)) for _ in range(3))
    y = smooth_relu.forward(x)
    names = {"x": x, "y": y, "g": g, "t": t}
    tensors = {k: tf.constant(v) for k, v in names.items()}
    torched = {k: torch.from_numpy(v) for k, v in names.items()}
    jaxed = {k: jnp.asarray(v) for k, v in names.items()}
    for mode, rule, seed in (("rev", smooth_relu.vjps[0], g), ("fwd", smooth_relu.jvps[0], t)):
        want = rule(seed, y, x)
        np.testing.assert_allclose(eval(smooth_relu.rule(0, mode=mode), {"np": np, **names}), want)
        got = eval(smooth_relu.rule(0, "tensorflow", mode), {"tf": tf, **tensors})
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
        got = eval(smooth_relu.rule(0, "torch", mode), {"torch": torch, **torched})
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
        got = eval(smooth_relu.rule(0, "jax", mode), {"jax": jax, **jaxed})
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def test_a_tensorflow_spelling_left_out_is_the_numpy_one(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cube_ops.py",
        """
        import gradcheck

        @gradcheck.op(
            shape=gradcheck.same_shape,
            vjps=[lambda g, ans, x: 3 * g * x * x],
            rules=["3 * g * x**2"],
        )
        def cube(x):
            return x ** 3
        """,
    )
    (cube,) = load_ops_files([path])
    assert cube.rule(0, "tensorflow") == cube.rule(0) == "3 * g * x**2"
    assert cube.rule(0, mode="fwd") is None  # no JVP texts declared
    assert cube.rule(0, "torch") is None  # a user op's NumPy text is never translated


class _WrongSmoothRelu(BuiltinEngine):
    """The builtin engine with smooth_relu's VJP and JVP taken from the input, not the output."""

    def vjp_rule(self, op, i):
        return (
            (lambda g, ans, x: g * -np.expm1(-x))
            if op.name == "smooth_relu"
            else super().vjp_rule(op, i)
        )

    def jvp_rule(self, op, i):
        return (
            (lambda t, ans, x: t * -np.expm1(-x))
            if op.name == "smooth_relu"
            else super().jvp_rule(op, i)
        )


@pytest.mark.parametrize(("modes", "code", "text"), [
    ("[rev]", "op-vjp", "smooth_relu's VJP for x is `g * (1 - np.exp(-y))`"),
    ("[fwd]", "op-jvp", "smooth_relu's JVP for x is `t * (1 - np.exp(-y))`"),
])  # fmt: skip
def test_a_fix_for_a_user_op_states_its_declared_rule(
    tmp_path: Path, modes: str, code: str, text: str
) -> None:
    load_ops_files([SMOOTH_RELU_OPS])
    case = load_case(
        tmp_path,
        f"""
        cases:
          - name: wrong
            expr: smooth_relu(x) * 2
            inputs: {{x: {{shape: [2, 3]}}}}
            modes: {modes}
        """,
    )
    result = check_case(case, _WrongSmoothRelu, RunOptions())
    assert result.status == "failed", result.message
    hint = next(h for h in result.hints if h.code == code)
    assert hint.node == "smooth_relu(x)"
    assert text in hint.fix


def test_a_user_op_beyond_the_registry_is_unsupported_at_second_order_in_the_builtin(
    tmp_path: Path,
) -> None:
    """smooth_relu's VJP calls np.expm1, which no registry op computes: the builtin engine
    cannot differentiate it again, and says so, instead of a wrong answer."""
    load_ops_files([SMOOTH_RELU_OPS])
    case = load_case(
        tmp_path,
        """
        cases:
          - {name: second, expr: smooth_relu(x) * x, inputs: {x: {shape: [3]}}, order: 2}
        """,
    )
    result = check_case(case, BuiltinEngine, RunOptions())
    assert result.status == "skipped", result.message
    assert "np.expm1" in result.message and "differentiated again" in result.message
    assert [i.status for i in result.inputs] == ["passed"]  # its first order is checked
