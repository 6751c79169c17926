"""Case files (SPEC §2): YAML in, validated `Case`s out, every problem tied to its line.

Files are read by `cases.reading` (a bounded read, then safe YAML whose mappings and
lists remember the line of each value), so every error names the line to change. A
case with a problem becomes an `InvalidCase` saying what is wrong; the other cases
still load. Nothing a file holds makes the loader raise: every value YAML can build
and every expression the parser accepts is a valid case or a `file:line` problem.

Where SPEC §2 is silent:

* ``defaults:`` may set ``dtype``, ``tolerance``, ``cotangent``, ``seed``, ``tags``,
  ``reference`` (``tensorflow``, ``numeric`` or ``both``; unset, the run's ``--reference``),
  ``modes`` (a list of ``rev``, ``fwd``) and ``order`` (1 or 2; unset, the run's
  ``--modes`` and ``--order``, by default ``[rev]`` and 1);
  a case's own value replaces the default, except that ``tolerance``'s ``rtol`` and
  ``atol`` are taken one by one (the case's, else the default's, else the dtype's).
  ``name``, ``description``, ``expr``, ``inputs``, ``wrt`` and ``expect`` belong to
  one case and have no default.
* An input spec's ``init`` defaults to ``normal``; `inputs` documents every init.
* Input names are ASCII identifiers (Python would NFKC-fold others inside the
  expression) and neither keywords nor op names. Every input must be used by the
  expression: an unused one is almost always a typo.
* ``max_elements`` (``--max-elements``) bounds every input and every node of the
  expression, checked from shapes (exact integers) before anything is allocated; a
  case's inputs and nodes together may hold `CASE_ELEMENTS` times as many, and the
  cases of one `load_paths` call `RUN_ELEMENTS` times as many. Arrays and nodes have at
  most `MAX_RANK` axes.
* Random inputs are checked at load and drawn when the case runs (`Case.inputs`).
* ``rtol``/``atol`` (``--rtol``/``--atol``) each replace that half of every tolerance;
  tolerances are finite numbers >= 0.
* ``timeout`` (also in ``defaults:``) is the seconds the engine may take on the case
  when it runs in a worker process (``--timeout``).
* `discover` skips hidden files and folders (``.git``, ``.venv``) inside a folder; a
  folder it cannot read is a problem of its own (an `InvalidCase`), never skipped.
"""

from __future__ import annotations

import difflib
import keyword
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..defaults import CASE_ELEMENTS, MAX_ELEMENTS, RUN_ELEMENTS
from ..errors import CaseFileError, UsageError
from ..expression import Expression, ExpressionError, parse
from ..ops import has_op
from ..ops.broadcast import fmt_shape
from .inputs import RandomSpec, cotangent_spec, stable_seed
from .model import (
    DEFAULT_TOLERANCES,
    DTYPES,
    MODES,
    ORDERS,
    Case,
    InvalidCase,
    Tolerance,
    numpy_dtype,
)
from .reading import Map, Seq, check_read, line_of, read_text, read_yaml
from .selection import selector

TOP_KEYS = ("defaults", "cases")
CASE_KEYS = (
    "name", "description", "expr", "inputs", "wrt", "dtype",
    "cotangent", "tolerance", "seed", "expect", "tags", "reference", "timeout", "modes",
    "order",
)  # fmt: skip
DEFAULT_KEYS = (
    "dtype", "tolerance", "cotangent", "seed", "tags", "reference", "timeout", "modes", "order",
)  # fmt: skip
SPEC_KEYS = ("shape", "init", "low", "high", "seed")
TOLERANCE_KEYS = ("rtol", "atol")
COTANGENTS = ("ones", "random")
REFERENCES = ("tensorflow", "numeric", "both")
NAME_PATTERN = r"[A-Za-z0-9_.-]+"
IDENTIFIER_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
SUFFIXES = (".yaml", ".yml")
MAX_RANK = 32
MAX_SIZE = 2**62  # no axis longer than NumPy's indices reach, whatever --max-elements says

# What a problem no check foresaw says (a bug of gradcheck's: the tests look for it).
INTERNAL = "gradcheck could not read this case"

# A setting (dtype, cotangent, seed, tags, rtol, atol) parsed, with the line it came from
# (0 for the command line's --rtol/--atol, which override every case's own).
Settings = dict[str, tuple[Any, int]]


def discover(
    paths: Sequence[str | Path], unreadable: list[tuple[Path, str]] | None = None
) -> list[Path]:
    """The case files `paths` name: files as given, folders searched for *.yaml/*.yml.

    The order is the arguments', then each folder's files sorted (a folder's own files
    before its subfolders'), so runs and reports are the same everywhere. A path
    named twice is listed once. `CaseFileError` for a path that does not exist. A
    folder that cannot be listed is added to `unreadable` with the reason.
    """
    found: dict[Path, Path] = {}  # resolved -> as given

    def cannot_list(error: OSError) -> None:
        if unreadable is not None:
            unreadable.append((Path(error.filename or path), error.strerror or str(error)))

    for path in map(Path, paths):
        if path.is_dir():
            for root, dirs, files in os.walk(path, onerror=cannot_list):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.endswith(SUFFIXES) and not name.startswith("."):
                        file = Path(root, name)
                        found.setdefault(file.resolve(), file)
        elif path.exists():
            found.setdefault(path.resolve(), path)
        else:
            raise CaseFileError(f"{path}: no such file or folder")
    return list(found.values())


def load_file(
    path: str | Path,
    *,
    max_elements: int = MAX_ELEMENTS,
    rtol: float | None = None,
    atol: float | None = None,
) -> list[Case | InvalidCase]:
    """Every case of the file at `path`, each loaded or saying what to change.

    A file that cannot be read as a case file at all is one `InvalidCase` named after
    it. `rtol`/`atol`, when given, replace that half of every case's tolerance.
    """
    file = str(path)
    try:
        cases, defaults = _structure(read_yaml(read_text(Path(path))))
    except CaseFileError as e:
        return [InvalidCase(Path(path).stem, file, e.line or 1, e.message)]
    except Exception as e:  # as in `_CaseReader.read`: never a crash
        return [InvalidCase(Path(path).stem, file, 1, f"{INTERNAL} file ({type(e).__name__}: {e})")]
    overrides = {
        key: (value, 0) for key, value in (("rtol", rtol), ("atol", atol)) if value is not None
    }
    reader = _CaseReader(file, defaults, overrides, max_elements)
    return [reader.read(raw, line) for raw, line in cases.located()]


def load_case(
    data: Mapping[str, Any],
    *,
    file: str = "<python>",
    line: int = 1,
    max_elements: int = MAX_ELEMENTS,
) -> Case | InvalidCase:
    """One case from a mapping of case-file keys, validated exactly as a file's entry is.

    The values are what YAML would give (numbers, strings, lists, mappings); NumPy
    arrays and scalars are also taken wherever a number or nested list is. There is no
    file, so every problem is reported at `file`:`line` (the Python API passes its
    caller's). The Python API (`gradcheck.check`) builds its cases here.
    """
    return _CaseReader(file, {}, {}, max_elements).read(_located(data, line), line)


def _located(value: Any, line: int) -> Any:
    """Plain Python data as the YAML reader's line-aware `Map`s and `Seq`s, all at `line`."""
    if isinstance(value, Mapping):
        mark = yaml.Mark(None, 0, line - 1, 0, None, None)
        data = Map(line)
        for key, item in value.items():
            data[key] = _located(item, line)
            data.key_lines[key] = line
            data.nodes[key] = yaml.ScalarNode("tag:yaml.org,2002:str", "", mark, mark)
        return data
    if isinstance(value, (list, tuple)):
        return Seq([_located(item, line) for item in value], [line] * len(value))
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name  # dtype=np.float32 or np.dtype("float64"), as a name
    return value


@dataclass
class Collected:
    """What `collect` found: the items to run, and what a run that has none says why."""

    items: list[Case | InvalidCase]
    paths: list[Path]
    files: int  # case files read
    keyword: str | None = None
    deselected: int = 0  # cases `keyword` left out

    @property
    def nothing_found(self) -> str | None:
        """Why no case was selected or found (SPEC §5's exit 5), None when one was."""
        if self.items:
            return None
        where = ", ".join(str(p) for p in self.paths)
        if self.deselected:
            every = "the case" if self.deselected == 1 else f"all {self.deselected} cases"
            return f"-k {self.keyword!r} deselected {every}"
        if not self.files:
            return f"no case files (*.yaml, *.yml) in {where}"
        return f"the case files in {where} hold no cases"


def load_paths(
    paths: Sequence[str | Path], *, keyword: str | None = None, **options: Any
) -> list[Case | InvalidCase]:
    """`collect`'s items."""
    return collect(paths, keyword=keyword, **options).items


def collect(
    paths: Sequence[str | Path], *, keyword: str | None = None, **options: Any
) -> Collected:
    """Every case of the files `paths` name (see `discover`), those matching `keyword`
    (``-k``, `selection`) if given; invalid ones always, since a broken file needs fixing
    whatever is selected. `options` are `load_file`'s. A folder that cannot be read is
    an `InvalidCase` of its own; cases past the run's element total (`RUN_ELEMENTS`
    times ``max_elements``) are invalid, saying so. A malformed `keyword` or a bad
    --rtol/--atol is a `UsageError`, raised before any file is read.
    """
    for key in ("rtol", "atol"):
        value = options.get(key)
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"--{key} must be a finite number >= 0, got {value}")
    selected = selector(keyword) if keyword else None
    unreadable: list[tuple[Path, str]] = []
    files = discover(paths, unreadable)
    items: list[Case | InvalidCase] = [
        InvalidCase(folder.name or str(folder), str(folder), 1, f"cannot read the folder: {why}")
        for folder, why in unreadable
    ]
    items += [item for path in files for item in load_file(path, **options)]
    found = len(items)
    if selected is not None:
        items = [i for i in items if not isinstance(i, Case) or selected(i.name, i.tags)]
    items = _within_run_total(items, RUN_ELEMENTS * options.get("max_elements", MAX_ELEMENTS))
    return Collected(items, [Path(p) for p in paths], len(files), keyword, found - len(items))


def _within_run_total(items: list[Case | InvalidCase], limit: int) -> list[Case | InvalidCase]:
    total, out = 0, []
    for item in items:
        if isinstance(item, Case):
            total += case_elements(item.expression)
            if total > limit:
                item = InvalidCase(
                    item.name,
                    item.file,
                    item.line,
                    f"the cases before this one already hold {limit:,} elements in their "
                    "inputs and nodes, the most one run checks; run the rest separately "
                    "(or raise --max-elements)",
                    item.expr,
                )
        out.append(item)
    return out


def case_elements(expression: Expression) -> int:
    """The elements of every node's value (inputs included): what an engine's tape holds."""
    return sum(math.prod(node.shape) for node in expression.nodes)


def _structure(data: Any) -> tuple[Seq, Settings]:
    """The file's `cases:` list and its parsed `defaults:`."""
    if data is None:
        raise CaseFileError("the file is empty; a case file holds a `cases:` list")
    if not isinstance(data, Map):
        check_read(data)
        raise CaseFileError("the top level must be a mapping with a `cases:` list")
    if data.problem:
        raise data.problem
    _check_keys(data, TOP_KEYS, "at the top level")
    if "cases" not in data:
        raise CaseFileError("no `cases:` list", data.line)
    cases, line = data.at("cases")
    if not isinstance(cases, Seq):
        check_read(cases)
        raise CaseFileError("`cases:` must be a list of cases, each starting with `- name:`", line)
    if "defaults" not in data:
        return cases, {}
    defaults, line = data.at("defaults")
    check_read(defaults)
    if not isinstance(defaults, Map):
        raise CaseFileError("`defaults:` must be a mapping, e.g. {dtype: float32}", line)
    _check_keys(defaults, DEFAULT_KEYS, "in defaults")
    return cases, _settings(defaults)


def _check_keys(mapping: Map, allowed: Sequence[str], where: str) -> None:
    for key in mapping:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise CaseFileError(
                f"unknown key {key!r} {where} ({hint}allowed: {', '.join(allowed)})",
                mapping.key_lines[key],
            )


def _settings(mapping: Map) -> Settings:
    """The keys `defaults:` may also set, parsed; tolerance split into rtol and atol."""
    settings: Settings = {}
    for key, parse_value in _SETTINGS.items():
        if key in mapping:
            value, line = mapping.at(key)
            settings[key] = parse_value(value, line), line
    if "tolerance" in mapping:
        tolerance, line = mapping.at("tolerance")
        if not isinstance(tolerance, Map):
            raise CaseFileError("tolerance must be a mapping, e.g. {rtol: 1e-5, atol: 1e-8}", line)
        _check_keys(tolerance, TOLERANCE_KEYS, "in tolerance")
        for key in tolerance:
            value, line = tolerance.at(key)
            number = _number(value, line, f"tolerance {key}", minimum=0.0)
            if not math.isfinite(number):  # an infinite tolerance would pass every engine
                raise CaseFileError(f"tolerance {key} must be finite, got {value!r}", line)
            settings[key] = number, line
    return settings


# -- values ----------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any, line: int, what: str, minimum: float = -math.inf) -> float:
    try:
        number = float(value) if _is_number(value) else math.nan
    except OverflowError:  # an integer beyond float64
        number = math.nan
    if not number >= minimum:  # also NaN
        at_least = f" >= {minimum:g}" if minimum > -math.inf else ""
        raise CaseFileError(f"{what} must be a number{at_least}, got {value!r}", line)
    return number


def _integer(value: Any, line: int, what: str) -> int:
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
    seconds = _number(value, line, "timeout", minimum=0.0)
    if not (0 < seconds < math.inf):
        raise CaseFileError(f"timeout must be a number of seconds above 0, got {value!r}", line)
    return seconds


def _cotangent(value: Any, line: int) -> str | np.ndarray:
    if isinstance(value, str):
        if value not in COTANGENTS:
            raise CaseFileError(
                f"cotangent {value!r} is not ones, random or an array of the output's shape", line
            )
        return value
    return _array(value, line, "cotangent", MAX_SIZE)  # its shape is checked against the output's


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
    "seed": lambda value, line: _integer(value, line, "seed"),
    "tags": _tags,
    "timeout": _timeout,
}


def _array(value: Any, line: int, what: str, limit: int) -> np.ndarray:
    """A literal number or rectangular nested list of numbers, as float64; no larger than
    `limit` elements, checked from its shape before the array is built."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":  # from `load_case`
        _check_shape(what, value.shape, limit, line)
        return value.astype(np.float64)
    _check_shape(what, _literal_shape(value, line, what, ()), limit, line)
    try:
        return np.array(value, dtype=np.float64)
    except OverflowError:
        raise CaseFileError(f"{what}: a number is too large for float64", line) from None


def _literal_shape(value: Any, line: int, what: str, index: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of a nested list of numbers; errors name and point at the bad item."""
    if _is_number(value):
        return ()
    where = "".join(f"[{i}]" for i in index)
    if not isinstance(value, Seq):
        raise CaseFileError(
            f"{what}: {value!r}{' at ' + where if where else ''} is not a number", line
        )
    if len(index) >= MAX_RANK:
        raise CaseFileError(f"{what} is nested more than {MAX_RANK} levels deep", line)
    shapes = [
        _literal_shape(item, item_line, what, (*index, i))
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


def _check_shape(what: str, shape: tuple[Any, ...], limit: int, line: int) -> None:
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


# -- one case --------------------------------------------------------------------------


class _CaseReader:
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
        """`raw` as a `Case`, or as an `InvalidCase` naming its first problem."""
        fields = raw if isinstance(raw, Map) else {}
        name, expr = fields.get("name"), fields.get("expr")
        try:
            check_read(raw)
            if not isinstance(raw, Map):
                raise CaseFileError("a case must be a mapping with name, expr and inputs", line)
            return self._case(raw)
        except CaseFileError as e:
            problem = e
        except Exception as e:  # a value no check foresaw: still this case's problem, not a crash
            problem = CaseFileError(f"{INTERNAL} ({type(e).__name__}: {e})", line)
        return InvalidCase(
            name
            if isinstance(name, str) and re.fullmatch(NAME_PATTERN, name)
            else f"{Path(self.file).stem}#{line}",
            self.file,
            problem.line or line,
            problem.message,
            expr.strip() if isinstance(expr, str) else "",
        )

    def _case(self, raw: Map) -> Case:
        name = self._name(raw)
        _check_keys(raw, CASE_KEYS, "in a case")
        settings = {**self.defaults, **_settings(raw), **self.overrides}
        dtype = _get(settings, "dtype", "float64")
        rtol, atol = DEFAULT_TOLERANCES[dtype]
        seed = _get(settings, "seed", stable_seed(name))
        # Random inputs are checked here and drawn when the case runs (`Case.inputs`).
        sources = self._inputs(raw, seed, dtype)
        expression = self._expression(raw, sources)
        wrt = _wrt(raw, expression, sources)
        return Case(
            name=name,
            file=self.file,
            line=raw.line,
            expr=expression.source,
            expression=expression,
            sources=sources,
            wrt=wrt,
            dtype=dtype,
            cotangent_source=_output_cotangent(settings, expression, seed, dtype),
            tolerance=Tolerance(_get(settings, "rtol", rtol), _get(settings, "atol", atol)),
            tolerance_given="rtol" in settings or "atol" in settings,
            seed=seed,
            expect=_expect(raw, expression, wrt, self.max_elements),
            tags=_get(settings, "tags", []),
            reference=_get(settings, "reference", None),
            modes=_get(settings, "modes", None),
            order=_get(settings, "order", None),
            description=_string(raw, "description") if "description" in raw else None,
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

    def _inputs(self, raw: Map, seed: int, dtype: str) -> dict[str, np.ndarray | RandomSpec]:
        if "inputs" not in raw:
            raise CaseFileError("the case has no `inputs:`", raw.line)
        inputs, line = raw.at("inputs")
        if not (isinstance(inputs, Map) and inputs):
            raise CaseFileError("inputs must map each input's name to its value or spec", line)
        values: dict[str, np.ndarray | RandomSpec] = {}
        for name in inputs:
            _check_input_name(name, inputs.key_lines[name])
            value, line = inputs.at(name)
            if isinstance(value, Map):
                values[name] = self._random(name, value, seed, dtype)
            else:
                array = _array(value, line, f"input {name!r}", self.max_elements)
                values[name] = array.astype(numpy_dtype(dtype))
        return values

    def _random(self, name: str, spec: Map, seed: int, dtype: str) -> RandomSpec:
        """Input `name`'s checked spec, refused by shape alone when too big."""
        what = f"input {name!r}"
        _check_keys(spec, SPEC_KEYS, f"in {what}'s spec")
        if "shape" not in spec:
            raise CaseFileError(f"{what}'s spec has no `shape:`, e.g. [2, 3]", spec.line)
        shape, line = spec.at("shape")
        if not (isinstance(shape, Seq) and len(shape) <= MAX_RANK):
            raise CaseFileError(f"{what}: shape must be a list of sizes, e.g. [2, 3]", line)
        shape = tuple(
            _integer(size, size_line, f"{what}: a size in shape")
            for size, size_line in shape.located()
        )
        _check_shape(what, shape, self.max_elements, line)
        low, high = (
            _number(*spec.at(key), f"{what}: {key}") if key in spec else None
            for key in ("low", "high")
        )
        if "seed" in spec:
            seed = _integer(*spec.at("seed"), f"{what}: seed")
        init = spec.get("init", "normal")
        try:
            return RandomSpec(seed, name, shape, init, low, high, dtype)
        except ValueError as e:
            raise CaseFileError(f"{what}: {e}", spec.line) from None

    def _expression(self, raw: Map, inputs: Mapping[str, np.ndarray | RandomSpec]) -> Expression:
        """The parsed expression; its errors and oversized nodes at their file lines."""
        if "expr" not in raw:
            raise CaseFileError("the case has no `expr:`", raw.line)
        source, line = raw.at("expr")
        if not isinstance(source, str):
            raise CaseFileError(f"expr must be a string, got {source!r}", line)
        node = raw.nodes["expr"]
        try:
            expression = parse(source, {name: value.shape for name, value in inputs.items()})
        except ExpressionError as e:
            raise CaseFileError(e.message, _ExprLines(node, source).line(e.line)) from None
        where = _ExprLines(node, source)
        for made in expression.nodes:
            _check_shape(made.text, made.shape, self.max_elements, where.line(made.line))
        total, limit = case_elements(expression), CASE_ELEMENTS * self.max_elements
        if total > limit:
            raise CaseFileError(
                f"the case's inputs and nodes hold {total:,} elements together, above the "
                f"limit of {limit:,} per case (raise it with --max-elements)",
                line,
            )
        for name in inputs:
            if name not in expression.inputs:
                raise CaseFileError(
                    f"input {name!r} is not used by the expression; use it or remove it",
                    raw["inputs"].key_lines[name],
                )
        return expression


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
    if "wrt" not in raw:
        return list(inputs)
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
    return list(wrt)


def _output_cotangent(
    settings: Settings, expression: Expression, seed: int, dtype: str
) -> np.ndarray | RandomSpec:
    """The cotangent setting made an array (or a random one's spec) of the output's shape."""
    cotangent, line = settings.get("cotangent", ("ones", 0))
    shape = expression.output.shape
    if isinstance(cotangent, np.ndarray):
        if cotangent.shape != shape:
            raise CaseFileError(
                f"cotangent has shape {fmt_shape(cotangent.shape)} but the output "
                f"{expression.output.text} has shape {fmt_shape(shape)}",
                line,
            )
        return cotangent.astype(numpy_dtype(dtype))
    if cotangent == "random":
        return cotangent_spec(seed, shape, dtype)
    return np.ones(shape, dtype=numpy_dtype(dtype))


def _expect(raw: Map, expression: Expression, wrt: list[str], limit: int) -> dict[str, np.ndarray]:
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
        array = _array(value, line, f"expect {name!r}", limit)
        shape = expression.lookup(name).shape
        if array.shape != shape:
            raise CaseFileError(
                f"expect {name!r} has shape {fmt_shape(array.shape)} "
                f"but {name} has shape {fmt_shape(shape)}",
                line,
            )
        pinned[name] = array
    return pinned
