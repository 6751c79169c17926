"""Two engines with a bug that reverse mode alone never shows (their runs are the examples
of docs/forward-and-second-order.md).

    gradcheck run examples/modes/cases.yaml -k tanh_jvp --engine examples/modes/engines.py:TanhJvp
    gradcheck run examples/modes/cases.yaml -k tanh_hvp --engine examples/modes/engines.py:PlainTanh

`TanhJvp` is the builtin engine with tanh's forward-mode rule written from the input,
``t * (1 - x**2)``: its gradients are right, its JVPs wrong. `PlainTanh` is PyTorch with
tanh as a ``torch.autograd.Function`` whose backward uses the saved output as a plain
array (``y.detach()``): right gradients, but their own gradient (second order) loses
everything that flows through y.
"""

import torch

from gradcheck.engines.builtin import BuiltinEngine
from gradcheck.engines.stock.torch import TorchEngine


class TanhJvp(BuiltinEngine):
    name = "tanh-jvp"

    def jvp_rule(self, op, i):
        if op.name == "tanh":
            return lambda t, ans, x: t * (1 - x * x)  # should be 1 - tanh(x)**2
        return super().jvp_rule(op, i)


class _Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y.detach() ** 2)  # should be y, a node of the graph


class PlainTanh(TorchEngine):
    name = "plain-tanh"

    def tanh(self, x):
        return _Tanh.apply(x)
