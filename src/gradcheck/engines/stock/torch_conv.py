"""``--engine torch``'s convolutions (SPEC §3.1) with PyTorch's own functions:
``F.conv1d``/``F.conv2d`` (strides, dilations, groups) and ``F.conv_transpose2d``.

PyTorch computes channels first with an ``(out, in, *kernel)`` filter: a channels-last
input moves its channels to axis 1 and back, a TensorFlow-layout filter (WIO/HWIO) is
permuted. TensorFlow's ``'SAME'`` pads unevenly (the odd one after), which PyTorch's
``padding=`` cannot say, so every padding is made explicit with ``F.pad`` first. A
transposed convolution is PyTorch's unpadded one, ``(n - 1) * stride + k`` long, then cut
to the output TensorFlow's pads leave (``F.pad`` with a negative width crops), zeros
added after where the output is longer than the windows reach.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...ops.conv_geometry import geometry, moved


def _conv(rank, x, w, strides, padding, dilations, groups, data_format, filter_format):
    geo = geometry(rank, tuple(x.shape), tuple(w.shape), strides, padding, dilations, groups,
                   data_format, filter_format)  # fmt: skip
    last = data_format.endswith("C")
    if last:
        x = torch.movedim(x, -1, 1)
    if not filter_format.startswith("O"):  # WIO / HWIO -> OIW / OIHW
        w = w.permute((2, 1, 0) if rank == 1 else (3, 2, 0, 1))
    pads = [p for pair in reversed(geo.pads) for p in pair]  # F.pad: last axis first
    if any(pads):
        x = F.pad(x, pads)
    conv = F.conv1d if rank == 1 else F.conv2d
    y = conv(x, w, stride=geo.strides, dilation=geo.dilations, groups=geo.groups)
    return torch.movedim(y, 1, -1) if last else y


class TorchConvOps:
    def conv1d(self, x, w, strides=1, padding="VALID", dilations=1, groups=1,
               data_format="NWC", filter_format="WIO"):  # fmt: skip
        return _conv(1, x, w, strides, padding, dilations, groups, data_format, filter_format)

    def conv2d(self, x, w, strides=1, padding="VALID", dilations=1, groups=1,
               data_format="NHWC", filter_format="HWIO"):  # fmt: skip
        return _conv(2, x, w, strides, padding, dilations, groups, data_format, filter_format)

    def conv2d_transpose(self, x, w, output_shape=None, strides=1, padding="SAME",
                         data_format="NHWC"):  # fmt: skip
        out = tuple(int(v) for v in output_shape)
        geo = geometry(2, out, tuple(w.shape), strides, padding, 1, 1, data_format, "HWIO",
                       "the output")  # fmt: skip
        last = data_format.endswith("C")
        if last:
            x = torch.movedim(x, -1, 1)
        # TF's [H, W, out, in] is conv_transpose2d's (in, out, H, W).
        full = F.conv_transpose2d(x, w.permute(3, 2, 0, 1), stride=geo.strides)
        sizes = moved(out, geo.x_perm)[1:3]
        cuts = []
        for (before, _), size, have in zip(geo.pads, sizes, full.shape[2:], strict=True):
            cuts.append((-before, before + size - have))
        full = F.pad(full, [p for pair in reversed(cuts) for p in pair])
        return torch.movedim(full, 1, -1) if last else full
