"""Values of case files checked one by one: numbers, dtypes, settings, arrays, keys.

Each check takes a value and the line it came from, and returns it parsed or raises a
`CaseFileError` at that line. `Problems` runs checks side by side, so a case reports
every problem it has (`CaseProblems`), not only the first.
"""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import CaseFileError, CaseProblems
from ..ops.broadcast import fmt_shape
from .dtypes import DTYPES
from .inputs import Given
from .model import MODES, ORDERS
from .reading import Map, Seq

SPEC_KEYS = ("shape", "init", "low", "high", "seed", "dtype")
TOLERANCE_KEYS = ("rtol", "atol")
COTANGENTS = ("ones", "random")
REFERENCES = ("tensorflow", "numeric", "both")
MAX_RANK = 32
MAX_SIZE = 2**62  # no axis longer than NumPy's indices reach, whatever --max-elements says

# A setting (dtype, cotangent, seed, tags, rtol, atol) parsed, with the line it came from
# (0 for the command line's --rtol/--atol, which override every case's own).
Settings = dict[str, tuple[Any, int]]


def check_keys(mapping: Map, allowed: Sequence[str], where: str) -> None:
    """Every key of `mapping` not in `allowed`, each a problem at its line."""
    unknown = []
    for key in mapping:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            unknown.append(
                CaseFileError(
                    f"unknown key {key!r} {where} ({hint}allowed: {', '.join(allowed)})",
                    mapping.key_lines[key],
                )
            )
    if unknown:
        raise CaseProblems(unknown)


def parse_settings(mapping: Map) -> Settings:
    """The keys `defaults:` may also set, parsed; tolerance split into rtol and atol.
    Each is checked, so that a problem in one does not hide one in another."""
    settings: Settings = {}
    problems = Problems()
    for key, parse_value in _SETTINGS.items():
        if key in mapping:
            value, line = mapping.at(key)
            parsed = problems.check(parse_value, value, line)
            if parsed is not FAILED:
                settings[key] = parsed, line
    if "tolerance" in mapping:
        tolerance, line = mapping.at("tolerance")
        if not isinstance(tolerance, Map):
            problems.add(
                CaseFileError("tolerance must be a mapping, e.g. {rtol: 1e-5, atol: 1e-8}", line)
            )
        else:
            problems.check(check_keys, tolerance, TOLERANCE_KEYS, "in tolerance")
            for key in tolerance:
                if key in TOLERANCE_KEYS:
                    value, line = tolerance.at(key)
                    number = problems.check(_tolerance, value, line, key)
                    if number is not FAILED:
                        settings[key] = number, line
    problems.raise_any()
    return settings


def _tolerance(value: Any, line: int, key: str) -> float:
    number = parse_number(value, line, f"tolerance {key}", minimum=0.0)
    if not math.isfinite(number):  # an infinite tolerance would pass every engine
        raise CaseFileError(f"tolerance {key} must be finite, got {value!r}", line)
    return number


FAILED: Any = object()  # what `Problems.check` returns for a check that found a problem


class Problems:
    """The problems found so far in one case (or `defaults:`): each check runs on its
    own, so a case reports all of them, not only the first."""

    def __init__(self) -> None:
        self.found: list[CaseFileError] = []

    def add(self, problem: CaseFileError) -> None:
        self.found += problem.problems if isinstance(problem, CaseProblems) else [problem]

    def check(self, check: Any, *args: Any) -> Any:
        """`check(*args)`, or FAILED when it raised a problem (kept)."""
        try:
            return check(*args)
        except CaseFileError as e:
            self.add(e)
            return FAILED

    def raise_any(self) -> None:
        if self.found:
            raise CaseProblems(self.found)


# -- values ----------------------------------------------------------------------------


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_number(value: Any, line: int, what: str, minimum: float = -math.inf) -> float:
    try:
        number = float(value) if is_number(value) else math.nan
    except OverflowError:  # an integer beyond float64
        number = math.nan
    if not number >= minimum:  # also NaN
        at_least = f" >= {minimum:g}" if minimum > -math.inf else ""
        raise CaseFileError(f"{what} must be a number{at_least}, got {value!r}", line)
    return number


def parse_integer(value: Any, line: int, what: str) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise CaseFileError(f"{what} must be a whole number >= 0, got {value!r}", line)
    return value


def _dtype(value: Any, line: int) -> str:
    if not (isinstance(value, str) and value in DTYPES):
        raise CaseFileError(
            f"dtype {value!r} is not supported (allowed: {', '.join(DTYPES)})", line
        )
    return value


def _timeout(value: Any, line: int) -> float:
    seconds = parse_number(value, line, "timeout", minimum=0.0)
    if not (0 < seconds < math.inf):
        raise CaseFileError(f"timeout must be a number of seconds above 0, got {value!r}", line)
    return seconds


def _cotangent(value: Any, line: int) -> str | Given:
    if isinstance(value, str):
        if value not in COTANGENTS:
            raise CaseFileError(
                f"cotangent {value!r} is not ones, random or an array of the output's shape", line
            )
        return value
    return parse_array(
        value, line, "cotangent", MAX_SIZE
    )  # its shape is checked against the output's


def _tags(value: Any, line: int) -> list[str]:
    if not (isinstance(value, Seq) and all(isinstance(tag, str) for tag in value)):
        raise CaseFileError(
            f"tags must be a list of strings, e.g. [matmul, slow], got {value!r}", line
        )
    return list(value)


def _reference(value: Any, line: int) -> str:
    if value not in REFERENCES:
        raise CaseFileError(
            f"reference {value!r} is not one of {', '.join(REFERENCES)} (numeric: finite "
            "differences, no TensorFlow; both: each, and where they disagree)",
            line,
        )
    return value


def _modes(value: Any, line: int) -> tuple[str, ...]:
    modes = list(value) if isinstance(value, Seq) else None
    if not modes or any(m not in MODES for m in modes) or len(set(modes)) != len(modes):
        raise CaseFileError(
            f"modes must be a list of {' and '.join(MODES)} without repeats, e.g. [rev, fwd] "
            f"(rev: gradients, reverse mode; fwd: JVPs, forward mode), got {value!r}",
            line,
        )
    return tuple(modes)


def _order(value: Any, line: int) -> int:
    if isinstance(value, bool) or value not in ORDERS:
        raise CaseFileError(
            f"order must be 1 or 2 (2: also the gradient of sum(grad * v), a Hessian-vector "
            f"product), got {value!r}",
            line,
        )
    return int(value)


_SETTINGS = {
    "dtype": _dtype,
    "reference": _reference,
    "modes": _modes,
    "order": _order,
    "cotangent": _cotangent,
    "seed": lambda value, line: parse_integer(value, line, "seed"),
    "tags": _tags,
    "timeout": _timeout,
}


def parse_array(value: Any, line: int, what: str, limit: int) -> Given:
    """A literal number or rectangular nested list of numbers, as float64 `Given`
    numbers; no larger than `limit` elements, checked from its shape first."""
    if is_array(value) and value.dtype.kind in "iuf":  # from `load_case`
        check_shape(what, value.shape, limit, line)
        return Given(value.shape, value.astype("float64"))  # a copy: the caller's may change
    shape = literal_shape(value, line, what, ())
    check_shape(what, shape, limit, line)
    try:
        return Given(shape, tuple(_flat(value)))
    except OverflowError:
        raise CaseFileError(f"{what}: a number is too large for float64", line) from None


def is_array(value: Any) -> bool:
    # An array comes from a caller of `load_case`, who has imported NumPy; asked of a
    # case file's values, the question must not import it (as pytest's `approx` asks).
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def _flat(value: Any) -> Iterator[float]:
    if isinstance(value, list):
        for item in value:
            yield from _flat(item)
    else:
        yield float(value)


def literal_shape(value: Any, line: int, what: str, index: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of a nested list of numbers; errors name and point at the bad item."""
    if is_number(value):
        return ()
    where = "".join(f"[{i}]" for i in index)
    if not isinstance(value, Seq):
        raise CaseFileError(
            f"{what}: {value!r}{' at ' + where if where else ''} is not a number", line
        )
    if len(index) >= MAX_RANK:
        raise CaseFileError(f"{what} is nested more than {MAX_RANK} levels deep", line)
    shapes = [
        literal_shape(item, item_line, what, (*index, i))
        for i, (item, item_line) in enumerate(value.located())
    ]
    for i, shape in enumerate(shapes):
        if shape != shapes[0]:
            raise CaseFileError(
                f"{what} is ragged: {where}[{i}] has shape {fmt_shape(shape)} "
                f"but {where}[0] has shape {fmt_shape(shapes[0])}",
                value.lines[i],
            )
    return (len(value), *(shapes[0] if shapes else ()))


def check_shape(what: str, shape: tuple[Any, ...], limit: int, line: int) -> None:
    """`shape` is at most MAX_RANK whole sizes whose product (exact) is at most `limit`."""
    if len(shape) > MAX_RANK:
        raise CaseFileError(f"{what} has {len(shape)} axes, more than {MAX_RANK}", line)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise CaseFileError(f"{what} has shape {shape!r}, which is not a list of sizes", line)
    size = math.prod(shape)
    if size > limit or any(n > min(limit, MAX_SIZE) for n in shape):
        elements = f"{size:,} elements" if size <= MAX_SIZE else "more elements"
        raise CaseFileError(
            f"{what} has shape {fmt_shape(shape)}, {elements}: above the limit of "
            f"{limit:,} per array (raise it with --max-elements)",
            line,
        )


def scratch(node: Any) -> int:
    """The elements `node`'s op holds while computing, beyond its value (`Op.scratch`)."""
    if node.op is None or node.op.scratch is None or node.op.variadic:
        return 0
    return node.op.scratch(*(a.shape for a in node.args), **node.attrs)


def check_scratch(node: Any, limit: int, line: int) -> None:
    """What `node`'s op holds while computing (a convolution's im2col expansion) is at
    most `limit` elements, as each array is."""
    if (held := scratch(node)) > limit:
        raise CaseFileError(
            f"{node.text}: its im2col expansion holds {held:,} elements, above the limit of "
            f"{limit:,} per array (raise it with --max-elements)",
            line,
        )
