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

Two variants (SPEC §4):

* A functional engine (JAX, HIPS autograd) implements ``vjp(self, fn, primals,
  cotangent)`` instead of `leaf`, `constant` and `grad`: `fn` is a pure function of the
  `wrt` values that calls the adapter's own op methods, `primals` the NumPy arrays, and
  the method returns one gradient per primal (`engines.functional`). `value` and
  `constant` are optional there: without them gradcheck uses `np.asarray` and the arrays.
* ``driver = "torch"`` (or ``"jax"``, ``"autograd"``, ``"tensorflow"``) says the backward
  pass is that framework's: the diagnosis then never blames the driver, only op rules
  (SPEC §6.1). The stock adapters say it.
* ``scalar_only = True`` says the engine differentiates scalars only: gradcheck builds
  ``sum(mul(output, constant(cotangent)))`` from the engine's own `mul` and `sum` and
  asks for the gradient of that, with a cotangent of 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..ops import Op, all_ops, get_op, has_op


class Engine(Protocol):
    name: str

    def leaf(self, name: str, value: Any) -> Any: ...

    def value(self, node: Any) -> Any: ...

    def grad(self, output: Any, wrt: list[Any], cotangent: Any) -> Any: ...


EngineFactory = Callable[[], Any]
T = TypeVar("T")
TAPE_METHODS = ("leaf", "value", "grad")
FRAMEWORK_DRIVERS = frozenset({"torch", "jax", "autograd", "tensorflow"})


def is_functional(engine: Any) -> bool:
    """A functional engine: `vjp(fn, primals, cotangent)`, no `grad` (SPEC §4)."""
    return callable(getattr(engine, "vjp", None)) and not callable(getattr(engine, "grad", None))


def framework_driver(engine: Any) -> str | None:
    """The framework whose backward driver an engine (class or instance) uses, as its
    `driver` attribute says; None for an engine that walks its own graph."""
    driver = getattr(engine, "driver", None)
    return driver if isinstance(driver, str) and driver in FRAMEWORK_DRIVERS else None


def missing_methods(engine: Any) -> list[str]:
    """The protocol methods an engine (class or instance) lacks; none for a functional one."""
    if is_functional(engine):
        return []
    return [m for m in TAPE_METHODS if not callable(getattr(engine, m, None))]


def _op_method(op: Op) -> Callable[..., Any]:
    if op.variadic and op.leading is not None:  # einsum(self, *operands, equation)

        def method(self: Any, *values: Any, **attrs: Any) -> Any:
            return self.apply(op, list(values), attrs)
    elif op.variadic:

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
        if op.origin is None:
            setattr(cls, op.name, _op_method(op))

    def __getattr__(self: Any, name: str) -> Any:
        # User-defined ops (--ops) are declared after the class: their methods come from here.
        if not name.startswith("_") and has_op(name):
            return _op_method(get_op(name)).__get__(self)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    cls.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return cls
