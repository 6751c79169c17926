"""The engine adapter protocol (SPEC §4), and the op methods built from the registry.

An engine is any class with these methods; a fresh instance is made per case::

    class Engine:
        name = "my-engine"                        # shown in reports
        def leaf(self, name, value): ...          # a differentiable input (np.ndarray)
        def constant(self, value): ...            # optional: literals, inputs not in wrt
        def matmul(self, a, b): ...               # one method per op, named as in SPEC §3,
        def sum(self, x, axis=None, keepdims=False): ...  # attributes as keywords
        def value(self, node): ...                # forward value, anything np.asarray takes
        def grad(self, output, wrt, cotangent): ...
            # -> one array per node in wrt: the gradient of sum(output * cotangent)

`concat` and `stack` get a list of nodes first; `getitem(x, index)` gets a tuple of
ints, slices, None and Ellipsis. A missing op method makes a case unsupported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..ops import Op, all_ops


class Engine(Protocol):
    name: str

    def leaf(self, name: str, value: Any) -> Any: ...

    def value(self, node: Any) -> Any: ...

    def grad(self, output: Any, wrt: list[Any], cotangent: Any) -> Any: ...


EngineFactory = Callable[[], Any]
T = TypeVar("T")


def _op_method(op: Op) -> Callable[..., Any]:
    if op.variadic:

        def method(self: Any, values: list[Any], **attrs: Any) -> Any:
            return self.apply(op, list(values), attrs)
    else:

        def method(self: Any, *args: Any, **attrs: Any) -> Any:
            return self.apply(op, list(args), attrs)

    method.__name__ = op.name
    method.__doc__ = f"{op.signature}: {op.doc}"
    return method


def with_op_methods(cls: type[T]) -> type[T]:
    """Give an engine class one method per op, each calling `self.apply(op, args, attrs)`.

    The builtin engine and the TensorFlow reference both speak the adapter protocol
    this way, so the driver treats them exactly like a user's engine.
    """
    for op in all_ops():
        setattr(cls, op.name, _op_method(op))
    return cls
