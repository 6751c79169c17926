"""Fixes in the engine's spelling for the stock torch and jax adapters (SPEC §6.1): a
wrong rule planted in a subclass of the stock adapter, through PyTorch's own custom
gradient (``torch.autograd.Function``) or JAX's (``jax.custom_vjp``), gets a fix that
states the correct rule in NumPy and in PyTorch or JAX spelling; a user op checked
through them, in the spelling its declaration gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engines_for_tests import load_cases
from gradcheck.cases import load_paths
from gradcheck.diagnosis import idiom
from gradcheck.engines.driver import EngineRun
from gradcheck.engines.loading import load_engine
from gradcheck.ops import get_op
from gradcheck.ops.user import load_ops_files
from gradcheck.runner import RunOptions, check_case
from test_stock_engines import SMOOTH_RELU_OPS, wrong_jax_smooth_relu, wrong_torch_smooth_relu
from test_user_ops import write

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[1]


def torch_tanh_without_the_square():
    from gradcheck.engines.stock.torch import TorchEngine

    class Tanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.tanh(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, upstream):
            (y,) = ctx.saved_tensors
            return upstream * (1 - y)  # the square forgotten

    class Engine(TorchEngine):
        def tanh(self, x):
            return Tanh.apply(x)

    return Engine


def jax_tanh_without_the_square():
    import jax.numpy as jnp

    from gradcheck.engines.stock.jax import JaxEngine

    @jax.custom_vjp
    def tanh(x):
        return jnp.tanh(x)

    tanh.defvjp(lambda x: (jnp.tanh(x), jnp.tanh(x)), lambda y, g: (g * (1 - y),))

    class Engine(JaxEngine):
        def tanh(self, x):
            return tanh(x)

    return Engine


def _top_fix(tmp_path: Path, engine) -> str:
    (case,) = load_cases(
        tmp_path,
        """
        cases:
          - name: tanh_layer
            expr: sum(tanh(x @ w))
            dtype: float64
            inputs:
              x: {shape: [3, 4], init: normal}
              w: {shape: [4, 2], init: normal}
        """,
    )
    result = check_case(case, engine)
    assert result.status == "failed"
    top = result.hints[0]
    assert (top.op, top.node) == ("tanh", "tanh(x @ w)"), top
    return top.fix or ""


@pytest.mark.parametrize(
    ("make", "spelled"),
    [
        (torch_tanh_without_the_square, "in PyTorch: `g * (1 - torch.tanh(x)**2)`"),
        (jax_tanh_without_the_square, "in JAX: `g * (1 - jnp.tanh(x)**2)`"),
    ],
)
def test_a_wrong_builtin_rule_gets_its_fix_in_the_adapters_spelling(tmp_path, make, spelled):
    fix = _top_fix(tmp_path, make())
    assert "`g * (1 - np.tanh(x)**2)`" in fix, fix
    assert spelled in fix, fix


@pytest.mark.parametrize(
    ("make", "spelled"),
    [
        (wrong_torch_smooth_relu, "in PyTorch: `g * torch.sigmoid(x)`"),
        (wrong_jax_smooth_relu, "in JAX: `g * jax.nn.sigmoid(x)`"),
    ],
)
def test_a_user_ops_fix_is_in_the_spelling_it_declares(make, spelled):
    load_ops_files([SMOOTH_RELU_OPS])
    case = next(
        c
        for c in load_paths([ROOT / "examples" / "custom_op" / "cases.yaml"])
        if c.name == "smooth_relu_alone"
    )
    result = check_case(case, make(), RunOptions(reference="numeric"))
    top = result.hints[0]
    assert top.op == "smooth_relu", top
    assert "`g * (1 - np.exp(-y))`" in (top.fix or ""), top.fix
    assert spelled in (top.fix or ""), top.fix


def test_the_stock_adapters_spell_their_fixes_in_their_library():
    # The stock adapters' own modules are gradcheck's; torch's hands back torch tensors,
    # jax's NumPy arrays: its spelling is its class's.
    for spec, arrays in (("torch", "torch"), ("jax", "numpy")):
        run = EngineRun(forward=np.zeros(1), grads={}, array_module=arrays)
        assert idiom.engine_spelling(load_engine(spec), run) == spec
    # A subclass in a user's module (this one imports both torch and jax): its base's.
    run = EngineRun(forward=np.zeros(1), grads={}, array_module="numpy")
    assert idiom.engine_spelling(jax_tanh_without_the_square(), run) == "jax"
    assert idiom.engine_spelling(torch_tanh_without_the_square(), run) == "torch"
    # TensorFlow first (an engine building TF ops beside a torch import), NumPy last.
    assert idiom.spelling(frozenset({"tensorflow", "torch"})) == "tensorflow"
    assert idiom.spelling(frozenset({"numpy", "autograd"})) == "numpy"


def test_a_rule_without_its_spelling_is_stated_in_numpy_alone(tmp_path):
    ops_file = write(
        tmp_path,
        "cube_ops.py",
        """
        import gradcheck

        @gradcheck.op(shape=gradcheck.same_shape, vjps=[lambda g, ans, x: 3 * g * x * x],
                      rules=["3 * g * x**2"])
        def cube(x):
            return x ** 3
        """,
    )
    (cube,) = load_ops_files([ops_file])  # a user op declaring no PyTorch text
    assert cube.rule(0, "torch") is None
    assert idiom.rule(cube, 0, "torch") == "`3 * g * x**2`"
    add = get_op("add")  # the same in every spelling: stated once
    assert idiom.rule(add, 0, "torch") == "`g`"


@pytest.mark.parametrize("name", ["conv1d", "conv2d_transpose", "max_pool2d", "avg_pool1d"])
def test_a_window_ops_fix_is_in_the_engines_spelling_too(name):
    op = get_op(name)
    assert idiom.rule(op, 0, "torch") == f"`{op.rule(0)}` (in PyTorch: `{op.rule(0, 'torch')}`)"
    assert idiom.rule(op, 0, "jax", "fwd") == (
        f"`{op.rule(0, mode='fwd')}` (in JAX: `{op.rule(0, 'jax', 'fwd')}`)"
    )
