"""The stock PyTorch adapter's elementwise ops, comparisons, where and clip (a mixin of
`TorchEngine`, by torch's own functions)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class TorchElementwiseOps:
    # -- elementwise -------------------------------------------------------------------
    def add(self, a, b):
        return torch.add(a, b)

    def sub(self, a, b):
        return torch.sub(a, b)

    def mul(self, a, b):
        return torch.mul(a, b)

    def div(self, a, b):
        return torch.div(a, b)

    def pow(self, a, b):
        return torch.pow(a, b)

    def maximum(self, a, b):
        return torch.maximum(a, b)

    def minimum(self, a, b):
        return torch.minimum(a, b)

    def neg(self, x):
        return torch.neg(x)

    def exp(self, x):
        return torch.exp(x)

    def log(self, x):
        return torch.log(x)

    def sqrt(self, x):
        return torch.sqrt(x)

    def abs(self, x):
        return torch.abs(x)

    def square(self, x):
        return torch.square(x)

    def sin(self, x):
        return torch.sin(x)

    def cos(self, x):
        return torch.cos(x)

    def tanh(self, x):
        return torch.tanh(x)

    def sigmoid(self, x):
        return torch.sigmoid(x)

    def relu(self, x):
        return torch.relu(x)

    def log1p(self, x):
        return torch.log1p(x)

    def expm1(self, x):
        return torch.expm1(x)

    def reciprocal(self, x):
        return torch.reciprocal(x)

    def rsqrt(self, x):
        return torch.rsqrt(x)

    def tan(self, x):
        return torch.tan(x)

    def erf(self, x):
        return torch.erf(x)

    def softplus(self, x):
        return F.softplus(x)

    def gelu(self, x, approximate=False):
        return F.gelu(x, approximate="tanh" if approximate else "none")

    def leaky_relu(self, x, alpha=0.2):
        return F.leaky_relu(x, negative_slope=alpha)

    def elu(self, x, alpha=1.0):
        return F.elu(x, alpha=alpha)

    def selu(self, x):
        return F.selu(x)

    def silu(self, x):
        return F.silu(x)

    def sign(self, x):
        return torch.sign(x)

    def floor(self, x):
        return torch.floor(x)

    def ceil(self, x):
        return torch.ceil(x)

    def round(self, x):
        return torch.round(x)

    # -- comparisons (0/1 in the operands' dtype, no gradient), where, clip ----------------
    def greater(self, a, b):
        return torch.gt(a, b).to(a.dtype)

    def greater_equal(self, a, b):
        return torch.ge(a, b).to(a.dtype)

    def less(self, a, b):
        return torch.lt(a, b).to(a.dtype)

    def less_equal(self, a, b):
        return torch.le(a, b).to(a.dtype)

    def equal(self, a, b):
        return torch.eq(a, b).to(a.dtype)

    def not_equal(self, a, b):
        return torch.ne(a, b).to(a.dtype)

    def where(self, cond, a, b):
        return torch.where(cond != 0, a, b)

    def clip(self, x, lo, hi):
        return torch.clamp(x, lo, hi)
