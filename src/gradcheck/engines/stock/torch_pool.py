"""``--engine torch``'s pooling, normalisation, soft-label loss and one_hot (SPEC §3.1),
with PyTorch's own functions: ``F.max_pool2d``/``F.avg_pool2d`` (1-D pools as 2-D with
H = 1), ``F.layer_norm``'s formula over any axes, ``F.cross_entropy`` with probabilities,
``F.one_hot``.

TensorFlow's ``'SAME'`` pads unevenly (the odd one after), which PyTorch's ``padding=``
cannot say: the input is padded with ``F.pad`` first, with -inf for a max-pool and 0 for an
average, whose divisor is then the count of in-bounds elements (an average of ones padded
alike), as TensorFlow's. Probed on PyTorch 2.13: ``F.max_pool2d`` gives a tie's gradient to
the window's first maximum in row-major order, as TensorFlow (convention ``first``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...ops.pool_geometry import geometry


def _pool(kind: str, x, ksize, strides, padding, data_format, rank):
    geo = geometry(tuple(x.shape), ksize, strides, padding, data_format, rank)
    if data_format.endswith("C"):  # channels last: PyTorch's pools want them first
        x = torch.movedim(x, -1, 1)
    if rank == 1:
        x = x.unsqueeze(2)
    pads = [p for pair in reversed(geo.pads) for p in pair]  # F.pad: last axis first
    k, s = (
        (1, *geo.ksize) if rank == 1 else geo.ksize,
        (1, *geo.strides) if rank == 1 else geo.strides,
    )
    if kind == "max":
        out = F.max_pool2d(F.pad(x, pads, value=-torch.inf) if any(pads) else x, k, s)
    else:
        out = F.avg_pool2d(F.pad(x, pads) if any(pads) else x, k, s)
        if any(pads):  # the average over in-bounds elements only, as TensorFlow's
            ones = torch.ones_like(x[:1, :1])
            out = out / F.avg_pool2d(F.pad(ones, pads), k, s)
    if rank == 1:
        out = out.squeeze(2)
    return torch.movedim(out, 1, -1) if data_format.endswith("C") else out


def _dims(axis, ndim: int) -> list[int]:
    return sorted({a % ndim for a in ([axis] if isinstance(axis, int) else axis)})


class TorchPoolOps:
    def max_pool2d(self, x, ksize=None, strides=None, padding="VALID", data_format="NHWC"):
        return _pool("max", x, ksize, strides, padding, data_format, 2)

    def avg_pool2d(self, x, ksize=None, strides=None, padding="VALID", data_format="NHWC"):
        return _pool("avg", x, ksize, strides, padding, data_format, 2)

    def max_pool1d(self, x, ksize=None, strides=None, padding="VALID", data_format="NWC"):
        return _pool("max", x, ksize, strides, padding, data_format, 1)

    def avg_pool1d(self, x, ksize=None, strides=None, padding="VALID", data_format="NWC"):
        return _pool("avg", x, ksize, strides, padding, data_format, 1)

    def layer_norm(self, x, axis=-1, epsilon=1e-5):
        dims = _dims(axis, x.ndim)
        if dims == list(range(x.ndim - len(dims), x.ndim)):  # trailing axes: PyTorch's own
            return F.layer_norm(x, x.shape[x.ndim - len(dims) :], eps=epsilon)
        return self.batch_norm(x, axis, epsilon)

    def batch_norm(self, x, axis=0, epsilon=1e-5):
        # F.batch_norm keeps dim 1 (the channels) only: any axes, by its formula.
        dims = _dims(axis, x.ndim)
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True, unbiased=False)
        return (x - mean) * torch.rsqrt(var + epsilon)

    def softmax_cross_entropy(self, logits, labels, axis=-1):
        # F.cross_entropy takes class probabilities as the target, classes on dim 1.
        if logits.ndim == 1:
            return F.cross_entropy(logits, labels, reduction="none")
        moved = torch.movedim(logits, axis, 1), torch.movedim(labels, axis, 1)
        return F.cross_entropy(*moved, reduction="none")

    def one_hot(self, indices, depth=None, dtype=None):
        dtype = getattr(torch, dtype or "float64")
        return F.one_hot(indices.long(), depth).to(dtype)
