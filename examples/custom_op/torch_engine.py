"""smooth_relu as a torch.autograd.Function, checked through the stock PyTorch adapter.

    gradcheck run examples/custom_op/cases.yaml --ops examples/custom_op/smooth_relu_ops.py \
        --engine examples/custom_op/torch_engine.py

Every builtin op comes from `TorchEngine` (``--engine torch``); the custom op is one
method more, named as the op is declared in smooth_relu_ops.py.
"""

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
        return upstream * torch.sigmoid(x)


class Engine(TorchEngine):
    name = "torch+smooth_relu"

    def smooth_relu(self, x):
        return SmoothRelu.apply(x)
