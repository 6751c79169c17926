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

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import CaseFileError, CaseProblems, UsageError
from ..util.lazy_numpy import np
from ..util.limits import MAX_ELEMENTS, RUN_ELEMENTS
from .case_reader import CASE_KEYS, INTERNAL, CaseReader, case_elements, invalid_case
from .model import Case, InvalidCase
from .reading import Map, Seq, check_read, read_text, read_yaml
from .selection import selector
from .values import SPEC_KEYS, Problems, Settings, check_keys, parse_settings

__all__ = [
    "CASE_KEYS",
    "DEFAULT_KEYS",
    "INTERNAL",
    "SPEC_KEYS",
    "Collected",
    "case_elements",
    "collect",
    "discover",
    "load_case",
    "load_file",
    "load_paths",
    "read_yaml",
]

TOP_KEYS = ("defaults", "cases")
DEFAULT_KEYS = (
    "dtype", "tolerance", "cotangent", "seed", "tags", "reference", "timeout", "modes", "order",
)  # fmt: skip
SUFFIXES = (".yaml", ".yml")


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
        problems = e.problems if isinstance(e, CaseProblems) else [e]
        return [invalid_case(Path(path).stem, file, 1, problems)]
    except Exception as e:  # as in `CaseReader.read`: never a crash
        return [InvalidCase(Path(path).stem, file, 1, f"{INTERNAL} file ({type(e).__name__}: {e})")]
    overrides = {
        key: (value, 0) for key, value in (("rtol", rtol), ("atol", atol)) if value is not None
    }
    reader = CaseReader(file, defaults, overrides, max_elements)
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
    return CaseReader(file, {}, {}, max_elements).read(_located(data, line), line)


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
        """Why no case was selected or found (exit code 5), None when one was."""
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


def _structure(data: Any) -> tuple[Seq, Settings]:
    """The file's `cases:` list and its parsed `defaults:`."""
    if data is None:
        raise CaseFileError("the file is empty; a case file holds a `cases:` list")
    if not isinstance(data, Map):
        check_read(data)
        raise CaseFileError("the top level must be a mapping with a `cases:` list")
    if data.problem:
        raise data.problem
    check_keys(data, TOP_KEYS, "at the top level")
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
    problems = Problems()  # an unknown key and a bad value are both reported
    problems.check(check_keys, defaults, DEFAULT_KEYS, "in defaults")
    settings = problems.check(parse_settings, defaults)
    problems.raise_any()
    return cases, settings
