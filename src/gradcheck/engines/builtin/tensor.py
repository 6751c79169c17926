"""The builtin engine's `Tensor`: a value and how it was made, and `apply`, which makes one.

In the backward pass of ``grad(..., create_graph=True)`` the registry's NumPy rules run on
Tensors instead of arrays. NumPy hands every ufunc and function it is called with on a
Tensor back to the Tensor (``__array_ufunc__``, ``__array_function__``), which applies
the registry op that computes it: ``g * np.cos(x)`` becomes ``mul(g, cos(x))``. So the
gradient is itself a graph of ops, which the engine can differentiate again, to any
order, with the same rules: one declaration per op serves every order.

Calls whose derivative is zero wherever it exists (comparisons, ``np.sign``, masks)
are computed on the values and give plain arrays: constants of the graph. A NumPy call
no op computes raises TypeError naming it, rather than quietly leaving the graph:
that rule cannot be differentiated again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ops import Op, get_op
from ...ops.broadcast import normalize_axis
from ...ops.elementwise import WHERE

_LOW = ("float16", "bfloat16")


class Tensor:
    """A value and how it was made. Hashed by identity, so it can key dicts."""

    __slots__ = ("args", "attrs", "name", "op", "requires_grad", "value")
    __hash__ = object.__hash__  # `==` is elementwise, as on arrays (below)

    def __init__(
        self,
        value: np.ndarray,
        op: Op | None = None,
        args: Sequence[Tensor] = (),
        attrs: dict[str, Any] | None = None,
        requires_grad: bool = False,
        name: str | None = None,
    ) -> None:
        self.value = value
        self.op = op
        self.args = tuple(args)
        self.attrs = attrs or {}
        self.requires_grad = requires_grad
        self.name = name

    def __repr__(self) -> str:
        made_by = self.op.name if self.op else (self.name or "constant")
        return f"Tensor({made_by}, shape={self.value.shape})"

    # -- what the rules read ----------------------------------------------------------
    shape = property(lambda self: self.value.shape)
    ndim = property(lambda self: self.value.ndim)
    size = property(lambda self: self.value.size)
    dtype = property(lambda self: self.value.dtype)

    def __len__(self) -> int:
        return len(self.value)

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError(
            "a Tensor of the builtin engine's graph turned into an array: the rule that did "
            "it (np.asarray, item assignment) cannot be differentiated again"
        )

    # -- NumPy's dispatch: each call becomes the op computing it -----------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            return NotImplemented
        if ufunc in _CONSTANT:
            return ufunc(*(_values(x) for x in inputs))
        if ufunc in _UFUNCS:
            return record(get_op(_UFUNCS[ufunc]), list(inputs), {})
        raise TypeError(_not_an_op(f"np.{ufunc.__name__}"))

    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        handler = _FUNCTIONS.get(func)
        if handler is None:
            raise TypeError(_not_an_op(f"np.{func.__name__}"))
        return handler(*args, **kwargs)

    @staticmethod
    def __gradcheck_apply__(op: Op, args: list[Any], attrs: dict[str, Any]) -> Tensor:
        """What `Op.__call__` does with a Tensor among its arguments."""
        return record(op, args, attrs)

    def __getitem__(self, index: Any) -> Tensor:
        return record(get_op("getitem"), [self], {"index": _index(index)})

    def reshape(self, *shape: Any) -> Tensor:
        return _reshape(self, shape[0] if len(shape) == 1 else shape)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _reduce("sum", self, axis, keepdims)

    def astype(self, dtype: Any, copy: bool = True) -> Tensor:
        if np.dtype(dtype) != self.dtype:
            raise TypeError(_not_an_op(f"astype({np.dtype(dtype).name})"))
        return self


# Operators are the ufuncs, so they reach `__array_ufunc__`; `==` is elementwise, as on arrays.
_BINARY_OPERATORS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide,
    "pow": np.power, "matmul": np.matmul,
}  # fmt: skip
_COMPARISONS = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}  # fmt: skip
for _name, _ufunc in _BINARY_OPERATORS.items():
    setattr(Tensor, f"__{_name}__", lambda self, other, f=_ufunc: f(self, other))
    setattr(Tensor, f"__r{_name}__", lambda self, other, f=_ufunc: f(other, self))
for _name, _ufunc in _COMPARISONS.items():
    setattr(Tensor, f"__{_name}__", lambda self, other, f=_ufunc: f(self, other))
Tensor.__neg__ = lambda self: np.negative(self)  # type: ignore[attr-defined]


def working(value: np.ndarray) -> np.ndarray:
    """float16/bfloat16 arrays in float32, to compute an op in; others as they are."""
    return value.astype(np.float32) if value.dtype.name in _LOW else value


# One output of an op with several (split): a Tensor made by PART from the op's Tensor,
# whose value is the tuple of outputs. Not registered: the engine's backward pass and
# forward mode treat it themselves (`engine.py`), it has no rules.
PART = Op(
    name="part", params=("values",), attrs={"index": 0}, shape=lambda values, index: (),
    forward=lambda values, index: values[index], doc="one output of an op with several",
)  # fmt: skip


def apply(op: Op, args: Sequence[Tensor], attrs: dict[str, Any]) -> Any:
    """`op` applied to Tensors: its value, in the arguments' dtype, and how it was made.
    Integer arguments (indices, labels) do not count: `take(x, i)` is in x's dtype. An op
    with several outputs gives a list of Tensors, one per output, each made by `PART`
    from one Tensor of the op whose value is the tuple of outputs."""
    floats = [a.value for a in args if a.value.dtype.kind not in "iu"]
    values = [working(a.value) for a in args]
    requires_grad = any(a.requires_grad for a in args)
    if requires_grad and not op.vjps:  # a user op declared without NumPy VJPs
        raise NotImplementedError(f"{op.name} declares no NumPy VJPs ({op.origin})")
    with np.errstate(all="ignore"):  # inf and nan are results to compare, not warnings
        out = op.forward(values, **attrs) if op.variadic else op.forward(*values, **attrs)
    # Integer arguments only (one_hot): the op's own output dtype, the case's.
    dtype = np.result_type(*floats) if floats else np.asarray(out).dtype
    if op.multi:
        outs = tuple(np.asarray(o).astype(dtype, copy=False) for o in out)
        made = Tensor(outs, op, list(args), attrs, requires_grad)  # type: ignore[arg-type]
        return [Tensor(v, PART, [made], {"index": k}, requires_grad) for k, v in enumerate(outs)]
    return Tensor(np.asarray(out).astype(dtype, copy=False), op, list(args), attrs, requires_grad)


def record(op: Op, args: list[Any], attrs: dict[str, Any]) -> Tensor:
    """`op` on a rule's operands, Tensors among them: arrays and numbers become constants,
    numbers in the Tensors' dtype (a rule's `2 * x` must not widen a float32 gradient)."""
    items = args[0] if op.variadic else args
    dtype = next(a.dtype for a in _flat(args) if isinstance(a, Tensor))
    return apply(op, [_constant(a, dtype) for a in items], attrs)


def _flat(args: list[Any]) -> list[Any]:
    return [a for arg in args for a in (arg if isinstance(arg, (list, tuple)) else [arg])]


def _constant(value: Any, dtype: np.dtype) -> Tensor:
    if isinstance(value, Tensor):
        return value
    array = np.asarray(value)
    # Masks and a rule's index arrays keep their dtype; numbers take the Tensors'.
    kept = array.dtype == bool or (array.dtype.kind in "iu" and array.ndim > 0)
    return Tensor(array if kept else array.astype(dtype))


def _values(value: Any) -> Any:
    return value.value if isinstance(value, Tensor) else value


def _not_an_op(call: str) -> str:
    return (
        f"{call} on a Tensor of the builtin engine's graph: no op of the registry computes "
        "it, so the rule using it cannot be differentiated again"
    )


def _axis(axis: Any) -> Any:
    """A NumPy axis argument as an op attribute: None, an int, or a list of ints."""
    if axis is None or isinstance(axis, (int, np.integer)):
        return None if axis is None else int(axis)
    return [int(a) for a in axis]


def _index(index: Any) -> tuple:
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if not (item is None or item is Ellipsis or isinstance(item, (int, np.integer, slice))):
            raise TypeError(_not_an_op(f"indexing with {type(item).__name__}"))
    return tuple(int(i) if isinstance(i, np.integer) else i for i in items)


def _reduce(name: str, x: Any, axis: Any = None, keepdims: bool = False, **unused: Any) -> Tensor:
    return record(get_op(name), [x], {"axis": _axis(axis), "keepdims": bool(keepdims)})


def _reshape(x: Any, shape: Any = None, **unused: Any) -> Tensor:
    target = [shape] if isinstance(shape, (int, np.integer)) else list(shape)
    return record(get_op("reshape"), [x], {"shape": [int(d) for d in target]})


def _transpose(x: Any, axes: Any = None) -> Tensor:
    return record(get_op("transpose"), [x], {"perm": None if axes is None else _axis(axes)})


def _swapaxes(x: Any, a: int, b: int) -> Tensor:
    perm = list(range(np.ndim(x)))
    i, j = normalize_axis(int(a), len(perm)), normalize_axis(int(b), len(perm))
    perm[i], perm[j] = perm[j], perm[i]
    return _transpose(x, perm)


def _expand_dims(x: Any, axis: Any) -> Tensor:
    if isinstance(axis, (int, np.integer)):
        return record(get_op("expand_dims"), [x], {"axis": int(axis)})
    return _reshape(x, np.expand_dims(np.empty(np.shape(x), bool), tuple(axis)).shape)


def _take(x: Any, indices: Any, axis: Any = None) -> Tensor:
    if axis is None or not isinstance(indices, (int, np.integer, range)):
        raise TypeError(_not_an_op("np.take with other than an int or a range along an axis"))
    pick = indices
    if isinstance(indices, range):
        pick = slice(indices.start, indices.stop, indices.step)
    return x[(slice(None),) * normalize_axis(int(axis), np.ndim(x)) + (pick,)]


def _join(name: str) -> Callable[..., Tensor]:
    def join(values: Sequence[Any], axis: int = 0) -> Tensor:
        return record(get_op(name), [list(values)], {"axis": int(axis)})

    return join


def _where(condition: Any, x: Any, y: Any) -> Tensor:
    return record(WHERE, [x, y], {"condition": np.asarray(_values(condition), bool)})


_UFUNCS = {
    np.add: "add", np.subtract: "sub", np.multiply: "mul", np.divide: "div",
    np.power: "pow", np.maximum: "maximum", np.minimum: "minimum", np.negative: "neg",
    np.exp: "exp", np.log: "log", np.sqrt: "sqrt", np.absolute: "abs", np.square: "square",
    np.sin: "sin", np.cos: "cos", np.tanh: "tanh", np.matmul: "matmul",
}  # fmt: skip
_CONSTANT = {
    np.sign, np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
    np.logical_not, np.logical_and, np.logical_or, np.isfinite, np.isnan, np.invert,
}  # fmt: skip
_FUNCTIONS: dict[Callable, Callable[..., Any]] = {
    np.sum: lambda x, axis=None, keepdims=False, **_: _reduce("sum", x, axis, keepdims),
    np.mean: lambda x, axis=None, keepdims=False, **_: _reduce("mean", x, axis, keepdims),
    np.reshape: _reshape,
    np.transpose: _transpose,
    np.swapaxes: _swapaxes,
    np.broadcast_to: lambda x, shape, **_: record(
        get_op("broadcast_to"), [x], {"shape": [int(d) for d in np.atleast_1d(shape)]}
    ),
    np.expand_dims: _expand_dims,
    np.squeeze: lambda x, axis=None: record(get_op("squeeze"), [x], {"axis": _axis(axis)}),
    np.take: _take,
    np.concatenate: _join("concat"),
    np.stack: _join("stack"),
    np.where: _where,
    np.zeros_like: lambda x, dtype=None, **_: np.zeros(np.shape(x), dtype or _values(x).dtype),
    np.ones_like: lambda x, dtype=None, **_: np.ones(np.shape(x), dtype or _values(x).dtype),
    np.shape: lambda x: _values(x).shape,
    np.ndim: lambda x: _values(x).ndim,
}
