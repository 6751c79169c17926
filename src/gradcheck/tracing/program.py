"""A traced function as gradcheck reads it: an ordinary case's expression, written out.

A tracer (`tracing.torch_trace`, `tracing.jax_trace`) walks the user's function and hands
every op it meets to a `Program`: the registry's ops become calls in the expression
language (one ``name = ...`` binding per traced op, the user's line as a comment), the
inputs and the constants the function captured become the case's inputs, and what no
registry op can say becomes an *opaque* op (`tracing.opaque`) checked by finite
differences of its own forward. The program then is a case like any other: the same
parser, engines, references, diagnosis and reports read it, and `save_case` writes it.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GradcheckError

# The float dtypes a case can have (SPEC §2), by NumPy's names.
FLOATS = ("float16", "bfloat16", "float32", "float64")


class TraceError(GradcheckError):
    """A function gradcheck cannot turn into a case; the message says what and where, and
    what to do instead."""


@dataclass(frozen=True)
class Where:
    """The user's line that made a node: file (relative where inside the working folder),
    line number, the line's text and the function it is in."""

    file: str
    line: int
    code: str = ""
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def short(self) -> str:
        """``file:line`` with the file's name alone (the expression's comments)."""
        return f"{self.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{self.line}"

    def quoted(self) -> str:
        """``file:line (`code`)``, as hints and refusals name a line."""
        return f"{self}" + (f" (`{self.code}`)" if self.code else "")


@dataclass
class Binding:
    """One traced op as an expression line: ``name = text``, made at `where` by `made_by`
    (the framework's op: ``aten.addmm``, ``dot_general``, a Function's name)."""

    name: str
    text: str
    made_by: str
    where: Where | None = None


@dataclass
class Program:
    """The expression a traced function is, with its inputs (differentiated ones in `wrt`,
    in the function's order, the constants it captured after them) and its `dtype`."""

    dtype: str
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    wrt: list[str] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    output: str = ""
    opaque: dict[str, Any] = field(default_factory=dict)  # op name -> its `OpaqueOp`
    notes: list[str] = field(default_factory=list)  # what the user should know of the trace
    _taken: set[str] = field(default_factory=set)
    _counts: dict[str, int] = field(default_factory=dict)

    # -- names ---------------------------------------------------------------------------
    def fresh(self, wanted: str) -> str:
        """A name for an input or binding, from `wanted` made an identifier, unused so far."""
        from ..ops import has_op

        base = re.sub(r"\W", "_", wanted).strip("_") or "v"
        if base[0].isdigit() or keyword.iskeyword(base):
            base = f"v_{base}"
        name, k = base, self._counts.get(base, 0)
        while name in self._taken or has_op(name):  # an op's name reads as a call
            k += 1
            name = f"{base}{k}" if not base[-1].isdigit() else f"{base}_{k}"
        self._counts[base] = k
        self._taken.add(name)
        return name

    # -- building ------------------------------------------------------------------------
    def add_input(self, wanted: str, value: np.ndarray, differentiable: bool) -> str:
        name = self.fresh(wanted)
        self.inputs[name] = value
        if differentiable:
            self.wrt.append(name)
        return name

    def bind(self, wanted: str, text: str, made_by: str, where: Where | None) -> str:
        """A binding of `text`, its name (`wanted` or a variant) returned for later lines."""
        name = self.fresh(wanted)
        self.bindings.append(Binding(name, text, made_by, where))
        return name

    def set_outputs(self, texts: list[str], noun: str) -> None:
        """The function's outputs as the expression's one output: several are checked as
        one, each flattened and all concatenated (`noun`: what the framework calls them)."""
        if len(texts) == 1:
            self.output = texts[0]
            return
        flat = [call("reshape", t, shape=[-1]) for t in texts]
        self.output = call("concat", f"[{', '.join(flat)}]", axis=0)
        self.notes.append(
            f"fn returns {len(texts)} {noun}: they are checked as one, each flattened and "
            "concatenated (the cotangent covers them all)"
        )

    def mark(self) -> tuple[int, int]:
        """Where the program is: `rollback` takes it back there."""
        return len(self.bindings), len(self.inputs)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Drop the bindings and inputs added since `mark` (a mapping that gave up)."""
        bindings, inputs = mark
        for b in self.bindings[bindings:]:
            self._taken.discard(b.name)
        for name in list(self.inputs)[inputs:]:
            self._taken.discard(name)
            del self.inputs[name]
        del self.bindings[bindings:]

    @property
    def source(self) -> str:
        """The expression: one binding per line, each with the line that made it (its file
        by name: hints give the path), then the output."""
        width = max((len(f"{b.name} = {b.text}") for b in self.bindings), default=0)
        lines = [
            f"{b.name} = {b.text}".ljust(width) + (f"  # {b.where.short}" if b.where else "")
            for b in self.bindings
        ]
        return "\n".join([*(line.rstrip() for line in lines), self.output])

    def where_of(self, text: str) -> Binding | None:
        """The binding a node's text (as hints name nodes) is, or names."""
        for b in self.bindings:
            if text in (b.text, b.name):
                return b
        return None


def assigned_name(where: Where | None) -> str | None:
    """The variable the user's line assigns (``h = ...``, ``self.h = ...``), if one: what
    the binding of that line's last op is named."""
    if where is None or not where.code:
        return None
    try:
        statement = ast.parse(where.code).body[0]
    except (SyntaxError, IndexError):
        return None
    targets = getattr(statement, "targets", None) or [getattr(statement, "target", None)]
    if len(targets) != 1 or targets[0] is None:
        return None
    target = targets[0]
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else None


def is_part(text: str) -> bool:
    """Whether `text` is one output of a bound several-output op: ``parts[1]``."""
    head, _, rest = text.partition("[")
    return head.isidentifier() and rest[:-1].isdigit() and text.endswith("]")


def numpy_dtype(name: str) -> np.dtype:
    """A case dtype's NumPy dtype (bfloat16: ml_dtypes')."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def case_input(value: np.ndarray) -> Any:
    """An input as a case holds it: an integer one as its values and dtype, a float one as
    its array (bfloat16, ml_dtypes' and no NumPy number the loader reads, as float32: exact)."""
    if value.dtype.kind in "iub":
        return {"values": value.astype(np.int64).tolist(), "dtype": "int64"}
    return value.astype(np.float32) if value.dtype.kind == "V" else value


def call(op: str, *args: str, **attrs: Any) -> str:
    """An op's call in the expression language: tensor arguments as texts, then attributes."""
    return f"{op}({', '.join([*args, *(f'{k}={literal(v)}' for k, v in attrs.items())])})"


def literal(value: Any) -> str:
    """A constant as the expression language writes it: numbers (``inf`` as 'inf'),
    strings, True/False/None, and lists of them."""
    if isinstance(value, (list, tuple)):
        return f"[{', '.join(literal(v) for v in value)}]"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    number = float(value)
    if math.isinf(number):
        return repr("inf" if number > 0 else "-inf")
    return repr(number)


def scalar(value: float) -> str:
    """A number as an operand of arithmetic (a literal: never differentiated)."""
    text = repr(float(value))
    return f"({text})" if text.startswith("-") else text


def index_text(base: str, index: Sequence[Any]) -> str:
    """``base[...]`` for a basic index: ints, slices and None."""
    parts = []
    for item in index:
        if item is None:
            parts.append("None")
        elif isinstance(item, slice):
            start, stop, step = (
                "" if v is None else str(v) for v in (item.start, item.stop, item.step)
            )
            parts.append(f"{start}:{stop}" + (f":{step}" if step else ""))
        else:
            parts.append(str(int(item)))
    return f"{base}[{', '.join(parts) or '...'}]"
