"""A PyTorch model with a custom Function whose backward forgot a square (tanh' = 1 - y**2).

    python examples/frameworks/torch_model.py            # gradcheck.torch.check's report
    python examples/frameworks/torch_model.py --torch    # torch.autograd.gradcheck's

docs/pytorch-and-jax.md shows the two side by side.
"""

import sys

import torch
import torch.nn as nn


class Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y)  # the bug: 1 - y**2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden, self.out = nn.Linear(3, 4), nn.Linear(4, 2)

    def forward(self, x):
        h = Tanh.apply(self.hidden(x))
        return self.out(h)


def main() -> None:
    torch.manual_seed(0)
    net = Net().double()
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    if "--torch" in sys.argv:
        torch.autograd.gradcheck(net, (x,))
    else:
        import gradcheck.torch

        print(gradcheck.torch.check(net, x))


if __name__ == "__main__":
    main()
