"""A generated case before it is text: inputs, literals and op applications.

`generate` builds these; `Program.case_data` writes one as case-file keys (SPEC §2), its
expression in the syntax of SPEC §3: operators where the op has one, ``x[...]`` for
`getitem`, calls otherwise, and a ``name = ...`` line for every value used more than
once, so that a diamond reads as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ops import Op, Shape
from ..ops.shape import format_index

INPUT_NAMES = ("x", "y", "z", "w", "u", "v")


@dataclass(eq=False)
class Leaf:
    """A fresh input; `values` in row-major order. `dtype` is an integer input's (an op's
    indices, SPEC §3.1); a float input's is None: it takes the case's."""

    shape: Shape
    values: tuple[float, ...] | tuple[int, ...]
    dtype: str | None = None

    def case_value(self) -> Any:
        """The input as a case file writes it: nested lists, an integer one with its dtype."""
        nested = np.reshape(self.values, self.shape).tolist()
        return nested if self.dtype is None else {"values": nested, "dtype": self.dtype}


@dataclass(eq=False)
class Literal:
    value: float
    shape: Shape = ()


@dataclass(eq=False)
class Apply:
    op: Op
    args: tuple[Value, ...]
    attrs: dict[str, Any]  # only those that differ from the op's defaults
    shape: Shape
    part: int | None = None  # which output of an op with several (split), as indexed


Value = Leaf | Literal | Apply


@dataclass
class Program:
    output: Apply
    dtype: str
    cotangent: str  # "ones" or "random"
    seed: int
    kinks: bool  # inputs drawn as small integers: exact zeros and ties on purpose

    def case_data(self, name: str = "fuzz") -> dict[str, Any]:
        """The case as the keys of a case file; `gradcheck.cases.loader.load_case` reads it."""
        source, leaves = _Renderer(self.output).render()
        return {
            "name": name,
            "expr": source,
            "inputs": {n: leaf.case_value() for n, leaf in leaves},
            "dtype": self.dtype,
            "cotangent": self.cotangent,
            "seed": self.seed,
        }


class _Renderer:
    def __init__(self, output: Apply) -> None:
        self.output = output
        self.order: list[Value] = []  # arguments before their users
        self.uses: dict[Value, int] = {}
        self._visit(output)
        self.names: dict[Value, str] = {}
        leaves = [v for v in self.order if isinstance(v, Leaf)]
        for i, leaf in enumerate(leaves):
            self.names[leaf] = INPUT_NAMES[i] if i < len(INPUT_NAMES) else f"x{i}"
        self.leaves = [(self.names[leaf], leaf) for leaf in leaves]

    def _visit(self, value: Value) -> None:
        # Iterative post-order: a long chain must not exhaust Python's recursion limit.
        stack: list[tuple[Value, bool]] = [(value, False)]
        while stack:
            node, done = stack.pop()
            if done:
                self.order.append(node)
                continue
            self.uses[node] = self.uses.get(node, 0) + 1
            if self.uses[node] > 1:
                continue
            stack.append((node, True))
            if isinstance(node, Apply):
                stack.extend((arg, False) for arg in reversed(node.args))

    def render(self) -> tuple[str, list[tuple[str, Leaf]]]:
        lines = []
        for value in self.order:
            if isinstance(value, Apply) and value is not self.output and self.uses[value] > 1:
                text = self._text(value)
                self.names[value] = f"h{len(lines) + 1}"
                lines.append(f"{self.names[value]} = {text}")
        lines.append(self._text(self.output))
        return "\n".join(lines), self.leaves

    def _text(self, value: Value) -> str:
        if value in self.names:
            return self.names[value]
        if isinstance(value, Literal):
            return str(int(value.value) if float(value.value).is_integer() else value.value)
        assert isinstance(value, Apply)
        op, args = value.op, value.args
        if op.operator == "u-":
            return f"-{self._operand(args[0])}"
        if op.operator:
            return f"{self._operand(args[0])} {op.operator} {self._operand(args[1])}"
        if op.name == "getitem":  # the parser reads `x[...]` as getitem; there is no call form
            return self._operand(args[0]) + format_index(value.attrs.get("index", ()))
        attrs = [f"{k}={v!r}" for k, v in value.attrs.items() if k != op.leading]
        plain = [self._text(a) for a in args]
        listed = [f"[{', '.join(plain)}]"] if op.variadic else plain
        if op.leading is not None:  # einsum("ij,jk->ik", a, b)
            listed = [repr(value.attrs.get(op.leading, op.attrs[op.leading])), *plain]
        call = f"{op.name}({', '.join(listed + attrs)})"
        return call if value.part is None else f"{call}[{value.part}]"

    def _operand(self, value: Value) -> str:
        """An argument as it stands beside an operator or a subscript: bracketed if it is one."""
        text = self._text(value)
        operator = isinstance(value, Apply) and value not in self.names and value.op.operator
        return f"({text})" if operator or text.startswith("-") else text
