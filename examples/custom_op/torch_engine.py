"""softplus as a torch.autograd.Function, checked through the stock PyTorch adapter.

    gradcheck run examples/custom_op/cases.yaml --ops examples/custom_op/softplus_ops.py \
        --engine examples/custom_op/torch_engine.py

Every builtin op comes from `TorchEngine` (``--engine torch``); the custom op is one
method more, named as the op is declared in softplus_ops.py.
"""

import torch

from gradcheck.engines.stock.torch import TorchEngine


class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logaddexp(torch.zeros_like(x), x)

    @staticmethod
    def backward(ctx, upstream):
        (x,) = ctx.saved_tensors
        return upstream * torch.sigmoid(x)


class Engine(TorchEngine):
    name = "torch+softplus"

    def softplus(self, x):
        return Softplus.apply(x)
