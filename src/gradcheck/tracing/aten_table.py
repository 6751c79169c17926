"""The machinery of the table that writes ATen ops as registry ops (`torch_aten.ATEN`):
what an entry gets (`V`, `Emit`, the arguments `bound` by the op's schema), what it
raises where the registry has no exact equivalent (`Unmapped`), and the helpers entries
share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .program import scalar
from .tables import Emit, V

Entry = Callable[[Emit, dict[str, Any]], Any]
ATEN: dict[str, Entry] = {}


def aten(*names: str) -> Callable[[Entry], Entry]:
    def register(entry: Entry) -> Entry:
        for name in names:
            ATEN[name] = entry
        return entry

    return register


def operand(v: Any) -> str:
    """A tensor's text, a text as it is, a number as a literal."""
    if isinstance(v, V):
        return v.text
    return v if isinstance(v, str) else scalar(v)


def axes_of(dim: Any, ndim: int) -> Any:
    """A dim argument as an axis attribute: None for every axis (torch's [] too)."""
    if dim is None or dim == []:
        return None
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return [d % max(ndim, 1) for d in dims]


def scaled(v: Any, alpha: Any) -> str:
    return operand(v) if alpha == 1 else f"{scalar(alpha)} * {operand(v)}"


def bound(func: Any, args: tuple, kwargs: dict, out_shapes: list) -> dict[str, Any]:
    """The op's arguments by its schema's names, defaults filled in, with the op's name
    (``__name__``, in-place ops as their functional twin) and its outputs' shapes."""
    schema = func._schema
    values: dict[str, Any] = {}
    for i, argument in enumerate(schema.arguments):
        if i < len(args) and not argument.kwarg_only:
            values[argument.name] = args[i]
        elif argument.name in kwargs:
            values[argument.name] = kwargs[argument.name]
        elif argument.has_default_value():
            values[argument.name] = argument.default_value
    name = func.overloadpacket.__name__
    values["__name__"] = name[:-1] if name.endswith("_") and not name.startswith("_") else name
    values["__out__"] = out_shapes
    return values
