"""ATen ops written as registry ops: the table the PyTorch tracer reads.

Each entry takes the op's arguments, bound by its schema's names with defaults filled in
(tensors as `V`: their text in the expression, shape and traced value), and returns the
text of each output (None for one nothing reads, an index say), calling registry ops as
the expression language writes them. An entry raises `Unmapped` where the registry has
no exact equivalent for these arguments (a max-pool with ``ceil_mode``): the op is then
an opaque node, checked by finite differences of PyTorch's own forward. Only the ops the
tracer records can appear, so ops on constants (``arange``, comparisons, ``bernoulli_``)
need no entry, and the in-place ops (``relu_``) are their functional twins.

The entries live by kind in `aten_elementwise` (with the activations and reductions),
`aten_shape` and `aten_nn` (linear algebra too); `aten_table` is what they share.
"""

from __future__ import annotations

from . import aten_elementwise, aten_nn, aten_shape
from .aten_table import ATEN, bound
from .tables import Emit, Unmapped, V

KINDS = (aten_elementwise, aten_shape, aten_nn)  # each fills ATEN as it is imported
__all__ = ["ATEN", "KINDS", "Emit", "Unmapped", "V", "bound"]
