"""The top line is the truth (SPEC §6.1) and one bug is one root cause (SPEC §6.2).

The engines are real: a custom ``torch.autograd.Function`` through the stock PyTorch
adapter, whose backward ignores its upstream gradient (PyTorch's driver is never the
suspect); and `planted_engines.Learner`, the builtin engine with a learner's four classic
bugs at once, over cases some of which hold two of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from corpus import ROOT
from engines_for_tests import load_cases
from gradcheck.cli import app
from gradcheck.engines.loading import load_engine
from gradcheck.engines.protocol import framework_driver
from gradcheck.engines.stock.torch import TorchEngine
from gradcheck.errors import UsageError
from gradcheck.runner import RunOptions, check_case

SMOOTH_RELU_OPS = ROOT / "examples" / "custom_op" / "smooth_relu_ops.py"
ENV = {"COLUMNS": "200", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}

IGNORES_UPSTREAM = """
import torch

from gradcheck.engines.stock.torch import TorchEngine


class SmoothRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logaddexp(torch.zeros_like(x), x)

    @staticmethod
    def backward(ctx, upstream):
        (x,) = ctx.saved_tensors
        return torch.sigmoid(x)  # the local derivative only: upstream never used


class Engine(TorchEngine):
    name = "torch+smooth_relu-ignores-upstream"

    def smooth_relu(self, x):
        return SmoothRelu.apply(x)
"""


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def walk(hints: list[dict]) -> list[dict]:
    """Every hint, and every hint folded under one."""
    return [h for hint in hints for h in [hint, *walk(hint.get("also", []))]]


# -- a framework's driver is never the suspect ------------------------------------------


def test_the_stock_adapters_declare_their_framework_as_their_driver():
    for spec, driver in [("torch", "torch"), ("jax", "jax"), ("autograd", "autograd")]:
        assert framework_driver(load_engine(spec)) == driver
    assert framework_driver(load_engine("tensorflow")) == "tensorflow"
    assert framework_driver(load_engine("builtin")) is None  # it walks its own graph


def test_a_driver_gradcheck_does_not_know_is_a_usage_error(tmp_path: Path):
    path = tmp_path / "engine.py"
    path.write_text(
        "from gradcheck.engines.builtin.engine import BuiltinEngine\n\n\n"
        "class Engine(BuiltinEngine):\n    driver = 'pytorch'\n"
    )
    with pytest.raises(UsageError, match="driver = 'pytorch'"):
        load_engine(str(path))


def test_a_torch_function_that_ignores_its_upstream_gradient_is_named_at_its_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Under the default cotangent (random) the case fails, and every hint is about the
    op's rule: none blames the backward driver, which is PyTorch's."""
    monkeypatch.chdir(tmp_path)
    engine = tmp_path / "engine.py"
    engine.write_text(IGNORES_UPSTREAM)
    ops = str(SMOOTH_RELU_OPS)
    result = invoke(
        "check", "smooth_relu(x)", "-i", "x=3,4", "--ops", ops, "--engine", str(engine),
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (case,) = json.loads(result.stdout)["cases"]
    top = case["hints"][0]
    assert (top["code"], top["mechanism"], top["op"]) == (
        "op-vjp",
        "ignores-upstream",
        "smooth_relu",
    )
    assert top["node"] == "smooth_relu(x)"
    everything = walk(case["hints"]) + walk([h for i in case["inputs"] for h in i["hints"]])
    drivers = [h["code"] for h in everything if h["code"] == "backprop-driver"]
    assert drivers + [h["code"] for h in everything if h["code"].startswith("fault:backprop")] == []


class SquareIgnoresUpstream(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, upstream):
        (x,) = ctx.saved_tensors
        return 2 * x  # upstream never used


class TorchSquareIgnoresUpstream(TorchEngine):
    def square(self, x):
        return SquareIgnoresUpstream.apply(x)


def test_a_framework_engine_whose_every_node_fails_is_never_blamed_on_its_driver(
    tmp_path: Path,
):
    """A builtin op's rule replaced, at every node of the expression: what a driver that
    hands each VJP ones would give (`fault:backprop.no-upstream`), yet the hints name the
    op and never the driver."""
    (case,) = load_cases(
        tmp_path,
        """
        cases:
          - name: nested
            expr: square(square(x))
            inputs: {x: {shape: [3, 2]}}
        """,
    )
    result = check_case(case, TorchSquareIgnoresUpstream, RunOptions())
    assert result.status == "failed"
    assert result.hints[0].op == "square", [h.code for h in result.hints]
    codes = [h.code for h in result.hints] + [a.code for h in result.hints for a in h.also]
    assert not [c for c in codes if c == "backprop-driver" or c.startswith("fault:backprop")]
