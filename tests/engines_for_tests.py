"""Small engines that break the adapter protocol (SPEC §4) one way each, and case helpers.

Most subclass `BuiltinEngine`, so each differs from a correct engine in one method only.
Tests use them as classes (`runner.run(cases, SomeEngine)`), through `load_engine` as a
module (`engines_for_tests:SomeEngine`) and as a file (`tests/engines_for_tests.py:...`).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from gradcheck.cases.loader import load_file
from gradcheck.cases.model import Case
from gradcheck.engines.builtin.engine import BuiltinEngine, Tensor

FILE = Path(__file__).resolve()


def load_cases(tmp_path: Path, text: str, name: str = "cases.yaml") -> list[Case]:
    """Write `text` (a YAML case file, dedented) into `tmp_path` and load it; all must be valid."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    items = load_file(path)
    invalid = [item for item in items if not isinstance(item, Case)]
    assert not invalid, invalid
    return items  # type: ignore[return-value]


class Engine(BuiltinEngine):
    """The class `load_engine` finds when `:ClassName` is left out."""

    name = "tests-default"


def _explode(what: str) -> None:
    raise ValueError(f"boom in {what}")


class NoJvp(BuiltinEngine):
    """No forward mode: unsupported for a case that asks for it."""

    name = "no-jvp"
    jvp = None  # type: ignore[assignment]


class RaisingJvp(BuiltinEngine):
    name = "raising-jvp"

    def jvp(self, output, wrt, tangents):
        _explode("jvp")


class RaisingGrad(BuiltinEngine):
    name = "raising-grad"

    def grad(self, output, wrt, cotangent):
        _explode("grad")


class NoneGrad(BuiltinEngine):
    def grad(self, output, wrt, cotangent):
        return None


class NoneElementGrad(BuiltinEngine):
    def grad(self, output, wrt, cotangent):
        return [None for _ in wrt]


class WrongCountGrad(BuiltinEngine):
    def grad(self, output, wrt, cotangent):
        return super().grad(output, wrt, cotangent)[:-1]


class StringGrad(BuiltinEngine):
    def grad(self, output, wrt, cotangent):
        return ["abc" for _ in wrt]


class ObjectGrad(BuiltinEngine):
    def grad(self, output, wrt, cotangent):
        return [object() for _ in wrt]


class RaggedGrad(BuiltinEngine):
    def grad(self, output, wrt, cotangent):
        return [[[1.0, 2.0], [3.0]] for _ in wrt]


class RaisingValue(BuiltinEngine):
    def value(self, node):
        _explode("value")


class RaisingConstructor(BuiltinEngine):
    def __init__(self) -> None:
        _explode("__init__")


class ExpRaises(BuiltinEngine):
    """Fine until an expression uses exp."""

    def exp(self, x):
        _explode("exp")


class WrongExp(BuiltinEngine):
    """exp's gradient doubled: cases without exp pass, cases with it fail."""

    def vjp(self, tensor: Tensor, i: int, g: np.ndarray) -> np.ndarray:
        share = super().vjp(tensor, i, g)
        return 2 * share if tensor.op is not None and tensor.op.name == "exp" else share


class LeavesOnly(BuiltinEngine):
    """Refuses gradients with respect to intermediate nodes, as SPEC §4 allows."""

    def grad(self, output, wrt, cotangent):
        if any(node.op is not None for node in wrt):
            raise NotImplementedError("only leaves can be differentiated")
        return super().grad(output, wrt, cotangent)


class Accumulating(BuiltinEngine):
    """Adds each backward pass to the last one, like a framework without zero_grad."""

    def __init__(self) -> None:
        self.totals: list[np.ndarray] | None = None

    def grad(self, output, wrt, cotangent):
        fresh = super().grad(output, wrt, cotangent)
        if self.totals is None:
            self.totals = fresh
        else:
            self.totals = [t + f for t, f in zip(self.totals, fresh, strict=True)]
        return [t.copy() for t in self.totals]


class MutatesInputs(BuiltinEngine):
    """Computes on its own copy, then scribbles over the arrays it was handed."""

    def leaf(self, name: str, value: Any) -> Tensor:
        own = np.array(value)
        value[...] = 1000.0
        return super().leaf(name, own)

    def constant(self, value: Any) -> Tensor:
        own = np.array(value)
        value[...] = -1000.0
        return super().constant(own)


class MulAddOnly:
    """Not a BuiltinEngine: only `mul` and `add`, so any other op is unsupported."""

    name = "mul-add-only"

    def __init__(self) -> None:
        self._inner = BuiltinEngine()

    def leaf(self, name, value):
        return self._inner.leaf(name, value)

    def constant(self, value):
        return self._inner.constant(value)

    def mul(self, a, b):
        return self._inner.mul(a, b)

    def add(self, a, b):
        return self._inner.add(a, b)

    def value(self, node):
        return self._inner.value(node)

    def grad(self, output, wrt, cotangent):
        return self._inner.grad(output, wrt, cotangent)


class NoGrad:
    """Looks like an engine but cannot differentiate: `load_engine` must refuse it."""

    def leaf(self, name, value):
        return value

    def value(self, node):
        return node


class WrongShapeGrad(BuiltinEngine):
    """Right numbers, wrong shape: each gradient flattened to a column."""

    def grad(self, output, wrt, cotangent):
        return [g.reshape(-1, 1) for g in super().grad(output, wrt, cotangent)]


class _Unconvertible:
    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("cannot be an array")


class UnconvertibleValue(BuiltinEngine):
    """`value` returns something NumPy's conversion raises an unexpected error for."""

    def value(self, node):
        return _Unconvertible()


class NoConstant(MulAddOnly):
    """No `constant` method: literals and inputs outside wrt arrive as extra leaves."""

    constant = None
