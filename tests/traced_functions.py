"""PyTorch functions, modules and custom Functions the traced-check tests run: correct ones,
and the bugs people write in a backward pass, some as they were reported.

Defined at the top of a module (not inside tests), as users define them, so a saved case's
ops file can import them again.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

# -- custom Functions ------------------------------------------------------------------


class Tanh(torch.autograd.Function):
    """Correct."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


class TanhNoSquare(torch.autograd.Function):
    """A learner's tanh: the square forgotten, `g * (1 - y)`."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y)


class LinearDoubledWeight(torch.autograd.Function):
    """`x @ w` whose weight gradient is twice the right one."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w.T, 2 * (x.T @ g)


class ISRLU(torch.autograd.Function):
    """pytorch/pytorch#4355, as reported: the backward returns the derivative alone,
    never multiplied by the upstream gradient `grad_out`."""

    @staticmethod
    def forward(ctx, tensor, alpha=1):
        negatives = torch.min(tensor, 0 * tensor)
        ctx.nisr = torch.rsqrt(1.0 + alpha * (negatives**2))
        return tensor * ctx.nisr

    @staticmethod
    def backward(ctx, grad_out):
        return ctx.nisr**3, None


class Swish(torch.autograd.Function):
    """Correct, written with setup_context and a jvp: forward mode works too."""

    @staticmethod
    def forward(x):
        return x * torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return g * (s + x * s * (1 - s))

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return t * (s + x * s * (1 - s))


class OnceTanh(torch.autograd.Function):
    """Correct, but its backward cannot be differentiated again."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


# -- modules ---------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, activation=torch.tanh) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        self.activation = activation

    def forward(self, x):
        h = F.relu(self.fc1(x))
        h = self.activation(self.fc2(h))
        return self.fc3(h)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.fc = nn.Linear(3 * 4 * 4, 5)

    def forward(self, x, labels):
        h = F.max_pool2d(F.relu(self.conv(x)), 2)
        return F.cross_entropy(self.fc(h.flatten(1)), labels)


class Normed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln, self.bn = nn.LayerNorm(6), nn.BatchNorm1d(6)

    def forward(self, x):
        return (self.ln(x) * self.bn(x)).log_softmax(-1).mean()


class WithTanh(nn.Module):
    """An ordinary module with one custom Function inside."""

    def __init__(self, function: type = TanhNoSquare) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(3, 4), nn.Linear(4, 2)
        self.function = function

    def forward(self, x):
        h = self.fc1(x)
        h = self.function.apply(h)
        return self.fc2(h)


# -- functions -------------------------------------------------------------------------


def detach_in_normaliser(x, w):
    h = torch.tanh(x @ w)
    s = h.detach().sum(1, keepdim=True)  # the bug: s depends on h too
    return h / s


def centred_under_no_grad(x):
    with torch.no_grad():
        m = x.mean()  # the bug: the mean depends on x too
    return (x - m) ** 2


def stable_logsumexp(x):
    m = x.max().detach()  # harmless: the result does not depend on m
    return torch.log(torch.exp(x - m).sum()) + m


def doubled_by_hook(x):
    y = x * 3
    y.register_hook(lambda g: g * 2)
    return y.sum()


def dropout_sum(x):
    return F.dropout(x, 0.5).sum()


def branches(x):
    if x.sum() > 0:
        return x * 2
    return x * 3
