"""Integer inputs (SPEC §3.1): indices, labels and ids, given or drawn with an integer dtype.

They are never differentiated and never perturbed; the parser lets only an op's integer
parameters take them (`Op.integer`). Their values are checked against what each op may
index (`Op.index_range`) when the case is read, at the input's line, so an index out of
range is a case error before anything runs, never an engine's or TensorFlow's traceback.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import CaseFileError, CaseProblems
from ..expression import Expression
from .dtypes import INTEGER_DTYPES
from .inputs import Given, RandomSpec, Source
from .reading import Map
from .values import check_keys, check_shape, is_array, literal_shape

INTEGER_LITERAL_KEYS = ("values", "dtype")


def input_dtype(value: Any, line: int) -> str:
    """An input's own `dtype:`: integer inputs only (a float input has the case's)."""
    if value not in INTEGER_DTYPES:
        raise CaseFileError(
            f"an input's dtype must be {' or '.join(INTEGER_DTYPES)} (an integer input: "
            f"indices, labels, ids), got {value!r}; float inputs take the case's dtype",
            line,
        )
    return value


def integer_literal(name: str, spec: Map, limit: int) -> Given:
    """`{values: [...], dtype: int64}`: an integer input's numbers."""
    what = f"input {name!r}"
    check_keys(spec, INTEGER_LITERAL_KEYS, f"in {what}")
    if "dtype" not in spec:
        raise CaseFileError(
            f"{what}: `values:` is for integer inputs and needs a `dtype:` "
            f"({' or '.join(INTEGER_DTYPES)}); a float input is the array itself",
            spec.line,
        )
    dtype = input_dtype(*spec.at("dtype"))
    return parse_integer_array(*spec.at("values"), what, limit, dtype)


def parse_integer_array(value: Any, line: int, what: str, limit: int, dtype: str) -> Given:
    """An integer input's numbers, whole and within `dtype`, kept exact (not as floats)."""
    if is_array(value) and value.dtype.kind in "iuf":  # from `load_case`
        check_shape(what, value.shape, limit, line)
        shape, numbers = value.shape, value.ravel().tolist()
    else:
        shape = literal_shape(value, line, what, ())
        check_shape(what, shape, limit, line)
        numbers = list(_numbers(value))
    bits = int(dtype[3:]) - 1
    for number in numbers:
        whole = isinstance(number, int) or (math.isfinite(number) and number.is_integer())
        if not (whole and -(2**bits) <= number < 2**bits):
            raise CaseFileError(f"{what}: {number!r} is not a whole number that fits {dtype}", line)
    return Given(tuple(shape), tuple(int(n) for n in numbers), dtype)


def _numbers(value: Any) -> Iterator[int | float]:
    if isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    else:
        yield value


def check_indices(
    expression: Expression, sources: Mapping[str, Source], lines: Mapping[str, int]
) -> None:
    """Each integer input within what every op it reaches may index: a problem at the
    input's line (`lines`) otherwise, naming the node, the value and the range."""
    problems = []
    for node in expression.op_nodes:
        op = node.op
        if op is None or op.index_range is None:
            continue
        low, high, what = op.index_range(*(a.shape for a in node.args), **node.attrs)
        for param, arg in zip(op.params, node.args, strict=False):
            if param not in op.integer or arg.name not in sources:
                continue
            bad = _outside(sources[arg.name], low, high)
            if bad is not None:
                message = f"{node.text}: {bad[0]} out of range for {what}{bad[1]}"
                problems.append(CaseFileError(message, lines[arg.name]))
    if problems:
        raise CaseProblems(problems)


def _outside(source: Source, low: int, high: int) -> tuple[str, str] | None:
    """What of `source` falls outside [low, high), and what to change: its first such
    value, or the range it is drawn from; None when every value is inside."""
    if isinstance(source, RandomSpec):
        lo, hi = map(int, source.bounds)
        if source.size and (lo < low or hi >= high):
            advice = f" (draw it with low: {low} and high: {high - 1} at most)"
            return f"{source.name} is drawn from [{lo}, {hi}],", advice
        return None
    values = source.values if isinstance(source, Given) else source.ravel().tolist()
    values = values if isinstance(values, tuple) else [values]
    first = next((v for v in values if not low <= v < high), None)
    return None if first is None else (f"index {int(first)}", "")


def check_values(
    expression: Expression, sources: Mapping[str, Source], lines: Mapping[str, int]
) -> None:
    """Each float input an op constrains (`Op.value_rule`: labels that sum to 1) as the op
    needs it: a problem at the input's line otherwise; a random input cannot be."""
    problems = []
    for node in expression.op_nodes:
        op = node.op
        if op is None or op.value_rule is None:
            continue
        shapes = [a.shape for a in node.args]
        for param, arg in zip(op.params, node.args, strict=False):
            if arg.name not in sources or param not in op.value_rule.params:
                continue
            source = sources[arg.name]
            values = None if isinstance(source, RandomSpec) else _flat(source)
            problem = op.value_rule.check(param, values, *shapes, **node.attrs)
            if problem is not None:
                problems.append(CaseFileError(f"{node.text}: {problem}", lines[arg.name]))
    if problems:
        raise CaseProblems(problems)


def _flat(source: Source) -> list[float]:
    """A given input's numbers, flat in C order, without NumPy where the case wrote them."""
    if isinstance(source, Given):
        values = source.values
        if isinstance(values, float):
            return [values] * source.size
        return list(values) if isinstance(values, tuple) else values.ravel().tolist()
    return source.ravel().tolist()
