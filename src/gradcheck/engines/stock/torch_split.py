"""The torch adapter's ops with several outputs (SPEC §3.1): split, unstack, slogdet.

torch.split's int is a chunk SIZE where tf.split's (and gradcheck's) is a COUNT of
pieces, so the sizes are worked out here and handed over as a list.
"""

from __future__ import annotations

import torch

from .numpy_api_multi import piece_sizes


class TorchSplitOps:
    def split(self, x, num_or_sizes=None, axis=0):
        return torch.split(x, piece_sizes(x.shape[axis], num_or_sizes), dim=axis)

    def unstack(self, x, axis=0):
        return torch.unbind(x, dim=axis)

    def slogdet(self, x):
        sign, logabsdet = torch.linalg.slogdet(x)
        return sign, logabsdet
