"""NumPy, imported on first use.

`gradcheck list`, `gradcheck ops` and the help read the op declarations and the case
files but compute nothing, and importing NumPy would be a third of their start-up. The
modules on that path bind `np` from here: the first attribute looked up imports NumPy,
and is kept, so that later lookups cost what an attribute of NumPy's own module does.
Type checkers see NumPy itself. The rest of gradcheck imports NumPy as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any


class OnDemand:
    """A module's attributes, the module imported when the first one is looked up."""

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(importlib.import_module(self._module), name)
        setattr(self, name, value)  # found once: the next lookup is an instance attribute
        return value

    def __repr__(self) -> str:
        return f"<{self._module}, imported on first use>"


if TYPE_CHECKING:
    import numpy as np
else:
    np = OnDemand("numpy")
