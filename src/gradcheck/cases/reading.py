"""Reading a case file: a bounded read of a regular file, then YAML whose values know their lines.

Nothing here can hang, exhaust memory or raise on what a file holds:

* Only a regular file is read (a FIFO, a device, a symlink to one: a problem, never a
  blocking read), and only up to `MAX_FILE_BYTES`, checked before parsing.
* The YAML is read with PyYAML's SafeLoader (its libyaml version where PyYAML has it,
  about three times faster), which builds nothing but plain data. Before anything is
  built, its node graph is walked once: aliases may be used `MAX_ALIASES` times in a
  file, and a value, with every alias in it expanded, may hold at most `MAX_NODES` nodes
  nested at most `MAX_DEPTH` deep. An alias bomb's few hundred bytes expand to billions
  of nodes; a value over a limit (or one that contains itself) reads as a problem at its
  line, and a file whose values add up to more than `MAX_NODES` is refused whole.
* A value a tag cannot build (``!!int abc``, ``!!bool maybe``, an integer of 5,000
  digits, a tag that would build an object) reads as a problem at its line too. Such
  problems are kept in the data and raised by `check_read`, so that they invalidate the
  case holding them, not the whole file. Dates are strings (as in YAML 1.2 and JSON);
  ``!!timestamp``, ``!!binary``, ``!!set`` and the like are refused.
* A key given twice in one mapping is a problem (YAML would silently keep the last).

One addition to YAML 1.1: exponent floats without a dot, such as ``1e-7``, are numbers
(as in YAML 1.2 and JSON), not strings.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ..errors import CaseFileError

MAX_FILE_BYTES = 10_000_000
MAX_ALIASES = 10_000
MAX_NODES = 2_000_000
MAX_DEPTH = 100
SHOWN_CHARS = 40  # of a value a problem quotes


class Unfit(OSError):
    """A file that is not a regular file, or is larger than its reader accepts."""


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at `path`, if it holds at most `limit` of them.

    Never blocks: a FIFO is opened without waiting for a writer and refused, as are
    devices (``/dev/zero``), folders and symlinks to them. `Unfit` for those and for a
    file too large; other `OSError`s as the system gives them.
    """
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unfit(f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise Unfit(f"the file has {info.st_size:,} bytes, above the limit of {limit:,}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:  # it grew since fstat
        raise Unfit(f"the file has more than {limit:,} bytes")
    return b"".join(chunks)


def read_text(path: Path) -> str:
    """The text of the case file at `path`, read by `read_bounded` (`MAX_FILE_BYTES`)."""
    try:
        data = read_bounded(path, MAX_FILE_BYTES)
    except Unfit as e:
        raise CaseFileError(
            f"{e}; a case file is YAML of at most {MAX_FILE_BYTES:,} bytes"
        ) from None
    except OSError as e:
        raise CaseFileError(f"cannot read the file: {e.strerror or e}") from None
    if b"\0" not in data:
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass
    raise CaseFileError("not a text file: a case file is YAML in UTF-8")


def _kind(mode: int) -> str:
    kinds = {stat.S_ISDIR: "a folder", stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a device"}
    return next((kind for test, kind in kinds.items() if test(mode)), "a special file")


def read_yaml(text: str) -> Any:
    """The one YAML document in `text`, read safely; mappings and lists know their lines.

    Raises `CaseFileError` at the line of any problem with the file as a whole.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        loader.unreadable = _check_bounds(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        context = f" ({e.context})" if e.context else ""
        raise CaseFileError(f"YAML syntax error: {e.problem}{context}", _line(mark)) from None
    except yaml.YAMLError as e:
        raise CaseFileError(f"not valid YAML: {e}") from None
    except RecursionError:
        raise CaseFileError("the YAML is nested too deeply") from None
    finally:
        loader.dispose()


# -- bounds ----------------------------------------------------------------------------


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_bounds(root: yaml.Node) -> dict[int, CaseFileError]:
    """The nodes (by id) too large, too deep or self-containing once aliases are expanded,
    with their problem; `CaseFileError` when the file breaks a limit as a whole.

    One iterative pass over the graph, each node visited once whatever aliases it.
    """
    done: dict[int, tuple[int, int]] = {}  # id -> (nodes, depth), aliases expanded
    unreadable: dict[int, CaseFileError] = {}
    entered: set[int] = set()
    aliases = 0
    # (node, None) to visit; (node, its children) once they are done
    stack: list[tuple[yaml.Node, list[yaml.Node] | None]] = [(root, None)]
    while stack:
        node, children = stack.pop()
        key = id(node)
        if children is not None:
            entered.discard(key)
            size = depth = 1
            if not any(id(c) in unreadable for c in children):  # else one problem, however large
                size += sum(done[id(c)][0] for c in children)
                depth += max(done[id(c)][1] for c in children)
                if size > MAX_NODES:
                    unreadable[key] = CaseFileError(
                        f"this value expands to more than {MAX_NODES:,} nodes (through its "
                        "aliases); write it out, or use fewer aliases",
                        _line(node.start_mark),
                    )
                    size = depth = 1
                elif depth > MAX_DEPTH:
                    unreadable[key] = CaseFileError(
                        f"this value is nested more than {MAX_DEPTH} levels deep",
                        _line(node.start_mark),
                    )
                    size = depth = 1
            done[key] = (size, depth)
            continue
        if key in done:  # a node met again is an alias
            aliases += 1
            if aliases > MAX_ALIASES:
                raise CaseFileError(
                    f"the file uses more than {MAX_ALIASES:,} aliases", _line(node.start_mark)
                )
            continue
        if key in entered:
            unreadable[key] = CaseFileError(
                "this value contains an alias of itself", _line(node.start_mark)
            )
            done[key] = (1, 1)
            continue
        children = _children(node)
        if not children:  # a scalar or an empty collection: one node
            done[key] = (1, 1)
            continue
        entered.add(key)
        stack.append((node, children))
        stack.extend((child, None) for child in children)
    if done[id(root)][0] > MAX_NODES:
        raise CaseFileError(f"the file expands to more than {MAX_NODES:,} nodes (its aliases)")
    return unreadable


# -- YAML with lines -------------------------------------------------------------------


class Map(dict):
    """A YAML mapping that remembers its line, its keys' lines and its value nodes."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[Any, int] = {}
        self.nodes: dict[Any, yaml.Node] = {}
        self.problem: CaseFileError | None = None  # a key given twice; see check_read

    def at(self, key: Any) -> tuple[Any, int]:
        """The value of `key` and the line it starts on."""
        return self[key], _line(self.nodes[key].start_mark)


class Seq(list):
    """A YAML sequence that remembers the line of each item."""

    def __init__(self, items: list[Any], lines: list[int]) -> None:
        super().__init__(items)
        self.lines = lines

    def located(self) -> Iterator[tuple[Any, int]]:
        """Each item with the line it starts on."""
        return zip(self, self.lines, strict=True)


class Unreadable:
    """What a value YAML cannot build here reads as: nothing is built, the problem is kept."""

    def __init__(self, error: CaseFileError, shown: str) -> None:
        self.error = error
        self.shown = shown

    def __repr__(self) -> str:
        return self.shown


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.unreadable: dict[int, CaseFileError] = {}  # from _check_bounds, per document

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        problem = self.unreadable.get(id(node))
        if problem is not None:
            return Unreadable(problem, "<too large>")
        return super().construct_object(node, deep=deep)


def _line(mark: yaml.Mark | None) -> int:
    return mark.line + 1 if mark else 1


def line_of(node: yaml.Node) -> int:
    return _line(node.start_mark)


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> Map:
    data = Map(_line(node.start_mark))
    first: dict[Any, int] = {}
    for key_node, _ in node.value:  # its own keys, before `<<: *anchor` merges come in
        line = _line(key_node.start_mark)
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            raise CaseFileError("a mapping key must be a name or a number", line)
        key = loader.construct_object(key_node)
        if key in first and data.problem is None:
            data.problem = CaseFileError(
                f"key {key!r} given twice (first on line {first[key]})", line
            )
        first.setdefault(key, line)
    loader.flatten_mapping(node)  # merged keys first, so its own keys win
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node)
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_lines[key] = _line(key_node.start_mark)
        data.nodes[key] = value_node
    return data


def _construct_seq(loader: _Loader, node: yaml.SequenceNode) -> Seq:
    items = [loader.construct_object(item, deep=True) for item in node.value]
    return Seq(items, [_line(item.start_mark) for item in node.value])


def _refused(loader: _Loader, node: yaml.Node) -> Unreadable:
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    error = CaseFileError(
        f"tag {tag} is not allowed: a case file holds plain numbers, strings, lists and mappings",
        _line(node.start_mark),
    )
    return Unreadable(error, tag)


def _never_raising(construct: Any) -> Any:
    """`construct`, with any problem building the value kept as an `Unreadable` at its line."""

    def safe(loader: _Loader, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except CaseFileError as e:
            return Unreadable(e, "<unreadable>")
        except Exception as e:  # ValueError, KeyError, TypeError: whatever the value made it raise
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            if isinstance(node, yaml.ScalarNode):
                shown = _short(node.value)
                what = f"{shown!r} cannot be read as {tag}"
            else:
                shown, what = f"<{tag}>", f"this value cannot be read as {tag}"
            reason = (
                e.problem
                if isinstance(e, yaml.MarkedYAMLError)
                else _short(str(e), 2 * SHOWN_CHARS)
            )
            if reason and not isinstance(e, KeyError):
                what += f" ({reason})"
            return Unreadable(CaseFileError(what, _line(node.start_mark)), shown)

    return safe


def _short(text: str, limit: int = SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def check_read(value: Any) -> None:
    """Raise the first problem met while reading `value`, at any depth.

    Unreadable values and repeated keys are kept in the data rather than raised while
    reading, so that they invalidate the case holding them, not the whole file. Values
    shared through aliases are looked at once.
    """
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Unreadable):
            raise item.error
        if not isinstance(item, (Map, Seq)) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Map):
            if item.problem:
                raise item.problem
            stack.extend(reversed([*item, *item.values()]))
        else:
            stack.extend(reversed(item))


_PLAIN = ("null", "bool", "int", "float", "str")
_Loader.yaml_constructors = {}  # only what a case file may hold: the rest is refused
for _name in _PLAIN:
    _tag = f"tag:yaml.org,2002:{_name}"
    _Loader.add_constructor(_tag, _never_raising(yaml.SafeLoader.yaml_constructors[_tag]))
_Loader.add_constructor("tag:yaml.org,2002:map", _never_raising(_construct_map))
_Loader.add_constructor("tag:yaml.org,2002:seq", _never_raising(_construct_seq))
_Loader.add_constructor(None, _refused)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if not tag.endswith(":timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)
