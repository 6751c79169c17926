"""JAX primitives written as registry ops: the table the JAX tracer reads.

Each entry takes one equation of the jaxpr (`lax_table.Eqn`: its operands as `V`, their
text in the expression, shape and value, its parameters and its outputs' shapes) and
returns the text of each output, calling registry ops as the expression language writes
them. An entry raises `Unmapped` where the registry has no exact equivalent for these
parameters (a window with pads other than VALID's or SAME's): the equation is then an
opaque node, checked by finite differences of JAX's own forward; so is a primitive with
no entry. Only equations on live values (floats that depend on a differentiated input)
reach the table: comparisons, ``argmax``, index arithmetic and everything else on
constants is computed, not written.

The entries live by kind in `lax_elementwise` (with selects, casts and reductions),
`lax_shape` (with slices, pads and gathers) and `lax_nn` (products, convolutions, pools);
`lax_table` is what they share.
"""

from __future__ import annotations

from . import lax_elementwise, lax_nn, lax_shape
from .lax_table import LAX, Eqn
from .tables import Emit, Unmapped, V

KINDS = (lax_elementwise, lax_shape, lax_nn)  # each fills LAX as it is imported
__all__ = ["KINDS", "LAX", "Emit", "Eqn", "Unmapped", "V"]
