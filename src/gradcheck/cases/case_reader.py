"""One case of a case file read into a `Case`, or an `InvalidCase` naming every problem.

A check that needs another's result (the expression needs the inputs' shapes, `wrt`
the expression) runs only when that one passed; every other runs whatever the rest
found, so a case's problems are all reported at once.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ..errors import CaseFileError, CaseProblems
from ..expression import Expression, ExpressionError, parse
from ..ops import has_op
from ..ops.broadcast import fmt_shape
from ..util.limits import CASE_ELEMENTS
from .dtypes import DEFAULT_TOLERANCES, INTEGER_DTYPES
from .inputs import Given, RandomSpec, Source, cotangent_spec, integer_dtype, stable_seed
from .integers import check_indices, check_values, input_dtype, integer_literal
from .model import Case, InvalidCase, Tolerance
from .reading import Map, Seq, check_read, line_of
from .values import (
    FAILED,
    MAX_RANK,
    SPEC_KEYS,
    Problems,
    Settings,
    check_keys,
    check_scratch,
    check_shape,
    parse_array,
    parse_integer,
    parse_number,
    parse_settings,
    scratch,
)

CASE_KEYS = (
    "name", "description", "expr", "inputs", "wrt", "dtype",
    "cotangent", "tolerance", "seed", "expect", "tags", "reference", "timeout", "modes",
    "order",
)  # fmt: skip
NAME_PATTERN = r"[A-Za-z0-9_.-]+"
IDENTIFIER_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"

# What a problem no check foresaw says (a bug of gradcheck's: the tests look for it).
INTERNAL = "gradcheck could not read this case"


def case_elements(expression: Expression) -> int:
    """Every node's elements (inputs included) and its op's scratch: what a run holds."""
    return sum(math.prod(node.shape) + scratch(node) for node in expression.nodes)


class CaseReader:
    """Reads the cases of one file, remembering names to refuse duplicates.

    A case's own settings win over the file's defaults and lose to the overrides.
    """

    def __init__(
        self, file: str, defaults: Settings, overrides: Settings, max_elements: int
    ) -> None:
        self.file = file
        self.defaults = defaults
        self.overrides = overrides
        self.max_elements = max_elements
        self.first_lines: dict[str, int] = {}

    def read(self, raw: Any, line: int) -> Case | InvalidCase:
        """`raw` as a `Case`, or as an `InvalidCase` naming every problem it has."""
        fields = raw if isinstance(raw, Map) else {}
        name, expr = fields.get("name"), fields.get("expr")
        try:
            check_read(raw)
            if not isinstance(raw, Map):
                raise CaseFileError("a case must be a mapping with name, expr and inputs", line)
            return self._case(raw)
        except CaseFileError as e:
            problems = e.problems if isinstance(e, CaseProblems) else [e]
        except Exception as e:  # a value no check foresaw: still this case's problem, not a crash
            problems = [CaseFileError(f"{INTERNAL} ({type(e).__name__}: {e})", line)]
        name = (
            name
            if isinstance(name, str) and re.fullmatch(NAME_PATTERN, name)
            else f"{Path(self.file).stem}#{line}"
        )
        return invalid_case(
            name, self.file, line, problems, expr.strip() if isinstance(expr, str) else ""
        )

    def _case(self, raw: Map) -> Case:
        """The case, checked key by key: a check that needs another's result (the
        expression needs the inputs' shapes) runs only when that one passed."""
        problems = Problems()
        name = problems.check(self._name, raw)
        problems.check(check_keys, raw, CASE_KEYS, "in a case")
        own = problems.check(parse_settings, raw)
        settings = {**self.defaults, **({} if own is FAILED else own), **self.overrides}
        dtype = _get(settings, "dtype", "float64")
        rtol, atol = DEFAULT_TOLERANCES[dtype]
        seed = _get(settings, "seed", stable_seed(name if name is not FAILED else ""))
        # Random inputs are checked here and drawn when the case runs (`Case.inputs`).
        sources = self._inputs(raw, seed, dtype, problems)
        expression = wrt = expect = cotangent = FAILED
        if sources is FAILED:
            problems.check(_expr_source, raw)  # parsing needs the inputs' shapes
        else:
            expression = problems.check(self._expression, raw, sources, dtype)
        if expression is not FAILED:
            wrt = problems.check(_wrt, raw, expression, sources)
            pinned = "expect" in raw  # pinned gradients: ones, as tape.gradient gives
            cotangent = problems.check(_output_cotangent, settings, expression, seed, dtype, pinned)
        if wrt is not FAILED:
            expect = problems.check(_expect, raw, expression, wrt, self.max_elements)
        description = problems.check(_string, raw, "description") if "description" in raw else None
        problems.raise_any()
        return Case(
            name=name,
            file=self.file,
            line=raw.line,
            expr=expression.source,
            expression=expression,
            sources=sources,
            wrt=wrt,
            dtype=dtype,
            cotangent_source=cotangent,
            tolerance=Tolerance(_get(settings, "rtol", rtol), _get(settings, "atol", atol)),
            tolerance_given="rtol" in settings or "atol" in settings,
            seed=seed,
            expect_sources=expect,
            tags=_get(settings, "tags", []),
            reference=_get(settings, "reference", None),
            modes=_get(settings, "modes", None),
            order=_get(settings, "order", None),
            description=description,
            timeout=_get(settings, "timeout", None),
        )

    def _name(self, raw: Map) -> str:
        if "name" not in raw:
            raise CaseFileError("the case has no `name:`", raw.line)
        name, line = raw.at("name")
        if not (isinstance(name, str) and re.fullmatch(NAME_PATTERN, name)):
            raise CaseFileError(
                f"name {name!r} must be letters, digits, '_', '.' and '-' only", line
            )
        if name in self.first_lines:
            raise CaseFileError(
                f"duplicate case name {name!r} (first on line {self.first_lines[name]})", line
            )
        self.first_lines[name] = line
        return name

    def _inputs(self, raw: Map, seed: int, dtype: str, problems: Problems) -> dict[str, Source]:
        """Each input checked (its problems kept in `problems`); FAILED if one has any."""
        if "inputs" not in raw:
            return problems.check(_raise, CaseFileError("the case has no `inputs:`", raw.line))
        inputs, line = raw.at("inputs")
        if not (isinstance(inputs, Map) and inputs):
            message = "inputs must map each input's name to its value or spec"
            return problems.check(_raise, CaseFileError(message, line))
        values = {name: problems.check(self._input, inputs, name, seed, dtype) for name in inputs}
        return FAILED if any(v is FAILED for v in values.values()) else values

    def _input(self, inputs: Map, name: Any, seed: int, dtype: str) -> Source:
        _check_input_name(name, inputs.key_lines[name])
        value, line = inputs.at(name)
        if isinstance(value, Map) and "values" in value:
            return integer_literal(name, value, self.max_elements)
        if isinstance(value, Map):
            return self._random(name, value, seed, dtype)
        return replace(parse_array(value, line, f"input {name!r}", self.max_elements), dtype=dtype)

    def _random(self, name: str, spec: Map, seed: int, dtype: str) -> RandomSpec:
        """Input `name`'s checked spec, refused by shape alone when too big."""
        what = f"input {name!r}"
        check_keys(spec, SPEC_KEYS, f"in the spec of {what}")
        if "shape" not in spec:
            raise CaseFileError(f"the spec of {what} has no `shape:`, e.g. [2, 3]", spec.line)
        shape, line = spec.at("shape")
        if not (isinstance(shape, Seq) and len(shape) <= MAX_RANK):
            raise CaseFileError(f"{what}: shape must be a list of sizes, e.g. [2, 3]", line)
        shape = tuple(
            parse_integer(size, size_line, f"{what}: a size in shape")
            for size, size_line in shape.located()
        )
        check_shape(what, shape, self.max_elements, line)
        low, high = (
            parse_number(*spec.at(key), f"{what}: {key}") if key in spec else None
            for key in ("low", "high")
        )
        if "seed" in spec:
            seed = parse_integer(*spec.at("seed"), f"{what}: seed")
        if "dtype" in spec:  # an integer input: init integers unless said otherwise
            dtype = input_dtype(*spec.at("dtype"))
        init = spec.get("init", "integers" if dtype in INTEGER_DTYPES else "normal")
        try:
            return RandomSpec(seed, name, shape, init, low, high, dtype)
        except ValueError as e:
            raise CaseFileError(f"{what}: {e}", spec.line) from None

    def _expression(self, raw: Map, inputs: Mapping[str, Source], dtype: str) -> Expression:
        """The parsed expression; its errors and oversized nodes at their file lines."""
        source, line = _expr_source(raw)
        node = raw.nodes["expr"]
        try:
            expression = parse(
                source,
                {name: value.shape for name, value in inputs.items()},
                {name: d for name, value in inputs.items() if (d := integer_dtype(value))},
                dtype,
            )
        except ExpressionError as e:
            raise CaseFileError(e.message, _ExprLines(node, source).line(e.line)) from None
        where = _ExprLines(node, source)
        for made in expression.nodes:
            check_shape(made.text, made.shape, self.max_elements, where.line(made.line))
            check_scratch(made, self.max_elements, where.line(made.line))
        total, limit = case_elements(expression), CASE_ELEMENTS * self.max_elements
        if total > limit:
            raise CaseFileError(
                f"the case's inputs and nodes hold {total:,} elements together, above the "
                f"limit of {limit:,} per case (raise it with --max-elements)",
                line,
            )
        unused = [
            CaseFileError(
                f"input {name!r} is not used by the expression; use it or remove it",
                raw["inputs"].key_lines[name],
            )
            for name in inputs
            if name not in expression.inputs
        ]
        if unused:
            raise CaseProblems(unused)
        check_indices(expression, inputs, raw["inputs"].key_lines)
        check_values(expression, inputs, raw["inputs"].key_lines)
        return expression


def _expr_source(raw: Map) -> tuple[str, int]:
    if "expr" not in raw:
        raise CaseFileError("the case has no `expr:`", raw.line)
    source, line = raw.at("expr")
    if not isinstance(source, str):
        raise CaseFileError(f"expr must be a string, got {source!r}", line)
    return source, line


def _raise(problem: CaseFileError) -> Any:
    raise problem


def invalid_case(
    name: str, file: str, line: int, problems: list[CaseFileError], expr: str = ""
) -> InvalidCase:
    """An `InvalidCase` saying every one of `problems` (`line`: where one without a line
    is): its message the first as it is (at the case's line), each other on a line of
    its own, after its `file:line:`."""
    first, *rest = problems
    message = first.message + "".join(f"\n{file}:{p.line or line}: {p.message}" for p in rest)
    located = [(p.line or line, p.message) for p in problems]
    return InvalidCase(name, file, first.line or line, message, expr, problems=located)


def _get(settings: Settings, key: str, default: Any) -> Any:
    return settings[key][0] if key in settings else default


def _string(raw: Map, key: str) -> str:
    value, line = raw.at(key)
    if not isinstance(value, str):
        raise CaseFileError(f"{key} must be a string, got {value!r}", line)
    return value


def _check_input_name(name: Any, line: int) -> None:
    identifier = isinstance(name, str) and re.fullmatch(IDENTIFIER_PATTERN, name)
    if not identifier or keyword.iskeyword(name):
        raise CaseFileError(
            f"input name {name!r} must be an identifier (ASCII letters, digits and '_', "
            "not starting with a digit) and not a Python keyword",
            line,
        )
    if has_op(name):
        raise CaseFileError(f"input name {name!r} is an op's name; rename the input", line)


class _ExprLines:
    """File lines of the expression's lines, as the parser counts them.

    A block scalar (``|`` or ``>``) starts on the line below its indicator, and the
    parser strips leading blank lines. A folded or quoted scalar may join lines, so
    no line goes past the scalar's last line.
    """

    def __init__(self, node: yaml.ScalarNode, source: str) -> None:
        self.first = line_of(node) + (node.style in ("|", ">"))
        self.first += source[: len(source) - len(source.lstrip())].count("\n")
        self.last = node.end_mark.line + 1

    def line(self, line: int) -> int:
        return min(self.first + line - 1, self.last)


def _wrt(raw: Map, expression: Expression, inputs: Mapping[str, Any]) -> list[str]:
    integers = expression.integer_inputs
    if "wrt" not in raw:
        floats = [name for name in inputs if name not in integers]
        if not floats:
            raise CaseFileError(
                "every input is an integer one, which is never differentiated: the case "
                "needs a float input, or a `wrt:` naming a binding",
                raw["inputs"].line if isinstance(raw.get("inputs"), Map) else raw.line,
            )
        return floats
    wrt, line = raw.at("wrt")
    if not (isinstance(wrt, Seq) and wrt):
        raise CaseFileError(
            "wrt must be a non-empty list of input or binding names, e.g. [x]", line
        )
    known = expression.names
    for i, (name, name_line) in enumerate(wrt.located()):
        if name not in known:
            raise CaseFileError(
                f"wrt names {name!r}, which is neither an input nor a binding "
                f"(known: {', '.join(known)})",
                name_line,
            )
        if name in wrt[:i]:
            raise CaseFileError(f"wrt names {name!r} twice", name_line)
        if expression.lookup(name).is_multi:
            raise CaseFileError(
                f"wrt names {name!r}, an op with several outputs: name one of them "
                f"({name}_0 = {name}[0]) and that",
                name_line,
            )
        if name in integers:
            raise CaseFileError(
                f"wrt names {name!r}, an integer input ({integers[name]}): integer inputs "
                "are never differentiated",
                name_line,
            )
    return list(wrt)


def _output_cotangent(
    settings: Settings, expression: Expression, seed: int, dtype: str, pinned: bool
) -> Source:
    """The cotangent setting made an array (or a random one's spec) of the output's shape;
    by default random (SPEC §2), ones where the case pins `expect`."""
    cotangent, line = settings.get("cotangent", ("ones" if pinned else "random", 0))
    shape = expression.output.shape
    if isinstance(cotangent, Given):
        if cotangent.shape != shape:
            raise CaseFileError(
                f"cotangent has shape {fmt_shape(cotangent.shape)} but the output "
                f"{expression.output.text} has shape {fmt_shape(shape)}",
                line,
            )
        return replace(cotangent, dtype=dtype)
    if cotangent == "random":
        return cotangent_spec(seed, shape, dtype)
    return Given(shape, 1.0, dtype)


def _expect(raw: Map, expression: Expression, wrt: list[str], limit: int) -> dict[str, Given]:
    """Pinned reference gradients, as float64, each of its wrt node's shape."""
    if "expect" not in raw:
        return {}
    expect, line = raw.at("expect")
    if not isinstance(expect, Map):
        raise CaseFileError("expect must map wrt names to gradients, e.g. {x: [1.0, 2.0]}", line)
    pinned = {}
    for name in expect:
        if name not in wrt:
            raise CaseFileError(
                f"expect names {name!r}, which is not in wrt ({', '.join(wrt)})",
                expect.key_lines[name],
            )
        value, line = expect.at(name)
        array = parse_array(value, line, f"expect {name!r}", limit)
        shape = expression.lookup(name).shape
        if array.shape != shape:
            raise CaseFileError(
                f"expect {name!r} has shape {fmt_shape(array.shape)} "
                f"but {name} has shape {fmt_shape(shape)}",
                line,
            )
        pinned[name] = array
    return pinned
