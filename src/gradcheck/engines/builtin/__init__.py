"""The builtin engine: reverse mode on NumPy (`engine.py`), its Tensor (`tensor.py`),
whose rules are the op registry's VJPs.
"""

from .engine import BuiltinEngine

__all__ = ["BuiltinEngine"]
