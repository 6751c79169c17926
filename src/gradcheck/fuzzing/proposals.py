"""What an op's other arguments and its attributes may be, given its first argument's shape.

Nothing here knows an op by name. Candidate shapes come from the ways shapes meet in
the registry (broadcasting: the same shape, size-1 axes, fewer or extra leading axes,
a scalar; a contraction with the last axis, as matmul's; one axis longer or shorter,
as concat's), candidate attributes from the attribute's name (``axis``: single,
negative and several axes, None; ``keepdims``; ``perm``; ``shape``; ``index``) or from
the op's declaration (`Op.attr_choices`: clip's bounds, norm's ord), and the op's own
shape rule keeps those that are valid. A new op is generated without a line here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from ..ops import Shape, ShapeError, get_op

MAX_DIM = 3  # axis sizes of fresh inputs: 1 to MAX_DIM
MAX_NODE_ELEMENTS = 64  # no generated value is larger
MAX_PRODUCT = 400  # argument combinations tried for ops with three or more parameters


@dataclass(frozen=True)
class Fresh:
    """A new input of this shape."""

    shape: Shape


@dataclass(frozen=True)
class Constant:
    """A numeric literal."""

    shape: Shape = ()


@dataclass(frozen=True)
class Reuse:
    """A value made earlier: `index` into the values so far."""

    index: int
    shape: Shape


Source = Fresh | Constant | Reuse


@dataclass(frozen=True)
class Completion:
    """The rest of one valid application: sources of the other arguments (or of the other
    list elements), the attributes that differ from the op's defaults, the output shape."""

    rest: tuple[Source, ...]
    attrs: tuple[tuple[str, Any], ...]
    shape: Shape
    part: int | None = None  # which output of an op with several (split(x, 2)[1])


@lru_cache(maxsize=4096)
def completions(
    op_name: str, first: Shape, earlier: tuple[Shape, ...], max_rank: int
) -> tuple[Completion, ...]:
    """Every valid way to apply the op to a first argument of shape `first`, simplest first.

    `earlier` are the shapes of the values made so far, oldest first (each may be
    reused; counted from the oldest, a reuse still names the same value when the
    shrinker deletes a later step); no output has more than `max_rank` + 1 axes or
    MAX_NODE_ELEMENTS elements.
    """
    op = get_op(op_name)
    if op.params[0] in op.integer or (op.integer and op.index_range is None):
        return ()  # one_hot's first argument is no float value; indices need their range
    fresh: list[Source] = [Fresh(s) for s in shapes_beside(first, max_rank)]
    sources = [*fresh, Constant(), *(Reuse(i, s) for i, s in enumerate(earlier))]
    if op.variadic:  # a list of one to three values; the third is like the second
        rests = [(), *((s,) for s in sources)]
        rests += [(s, Fresh(s.shape)) for s in sources if not isinstance(s, Constant)]
    else:  # take's indices, softmax_cross_entropy's labels: a fresh input, made to fit
        ruled = op.value_rule.params if op.value_rule else ()
        each = [fresh if p in (*op.integer, *ruled) else sources for p in op.params[1:]]
        rests = list(itertools.islice(itertools.product(*each), MAX_PRODUCT))
    attr_sets = [
        dict(zip(op.attrs, values, strict=True))
        for values in itertools.product(
            *(
                attr_values(name, default, first, op.attr_choices.get(name, ()))
                for name, default in op.attrs.items()
            )
        )
    ]
    found = []
    for rest in rests:
        if op.variadic and any(isinstance(s, Constant) for s in rest):
            continue  # the parser takes only values in concat's and stack's list
        shapes = [first, *(s.shape for s in rest)]
        for attrs in attr_sets:
            try:
                out = op.shape(shapes, **attrs) if op.variadic else op.shape(*shapes, **attrs)
            except ShapeError:
                continue
            changed = tuple((k, v) for k, v in attrs.items() if v != op.attrs[k])
            # An op with several outputs (split) is used by one of them, indexed.
            for part, shape in enumerate(out) if op.multi else [(None, out)]:
                if len(shape) <= max_rank + 1 and 1 <= math.prod(shape) <= MAX_NODE_ELEMENTS:
                    found.append(Completion(tuple(rest), changed, tuple(shape), part))
    return tuple(found)


@cache
def first_ranks(op_name: str, max_rank: int) -> tuple[int, ...]:
    """The ranks a fresh first argument of the op may have (some completion exists)."""
    return tuple(r for r in range(max_rank + 1) if completions(op_name, (2,) * r, (), max_rank))


def shapes_beside(shape: Shape, max_rank: int) -> list[Shape]:
    """Shapes an op's other argument may take beside a first argument of `shape`."""
    s, r = tuple(shape), len(shape)
    found: list[Shape] = [s]
    if r:  # square contractions early: a first argument that shrinks keeps one that fits
        found += [(*s[:-2], s[-1], s[-1]), (s[-1], s[-1])]
    found += [_with(s, i, 1) for i in range(r) if s[i] > 1]  # size-1 axes that broadcast
    found.append((1,) * r)
    found += [s[k:] for k in range(1, r + 1)]  # fewer leading axes, down to a scalar
    found += [(2, *s), (1, *s)]  # extra leading axes
    found.append(tuple(2 if d == 1 else d for d in s))  # the first argument broadcasts
    if r:
        for n in range(1, MAX_DIM + 1):  # a contraction with the last axis, batched or not
            found += [(s[-1], n), (*s[:-2], s[-1], n), (2, s[-1], n), (1, s[-1], n)]
        found += [_with(s, i, d) for i in range(r) for d in range(1, MAX_DIM + 1) if d != s[i]]
    return [shape for shape in dict.fromkeys(found) if len(shape) <= max_rank + 1]


def attr_values(
    name: str, default: Any, shape: Shape, declared: Sequence[Any] | Callable = ()
) -> list[Any]:
    """Candidate values of the attribute `name` for a first argument of `shape`, default
    first; `declared` are the op's own choices for it (`Op.attr_choices`), or a function
    of `shape` giving them."""
    r = len(shape)
    if callable(declared):
        candidates = list(declared(tuple(shape)))
    elif declared:
        candidates: list[Any] = list(declared)
    elif name == "keepdims":
        candidates = [False, True]
    elif name == "axis":
        singles = [*range(r + 1), *range(-1, -r - 2, -1)]
        pairs = [[i, j] for i, j in itertools.combinations(range(r), 2)]
        candidates = [*singles, None, *pairs, *([[0, -1]] if r > 1 else [])]
    elif name == "perm":
        candidates = [None, *map(list, itertools.permutations(range(r)))] if r <= 4 else [None]
    elif name == "shape":
        candidates = _target_shapes(shape)
    elif name == "index":
        return list(INDEXES)  # not the default, (): `x[]` is no expression
    else:  # an attribute this module has no notion of: its default only
        candidates = []
    return _unique([default, *candidates])


def _target_shapes(shape: Shape) -> list[list[int]]:
    """Shapes to reshape or broadcast `shape` to."""
    s, n = list(shape), math.prod(shape)
    found = [[-1], [n], s[::-1], [1, *s], [*s, 1]]
    found += [[a, n // a] for a in range(2, n) if n % a == 0]
    if s:
        found += [[-1, s[-1]], [s[0], -1]]
    found += [[2, *s], [1, *s], [2 if d == 1 else d for d in s], [3 if d == 1 else d for d in s]]
    return found


# Basic indexes (SPEC §3): ints, negative ints, slices with and without steps, None, `...`.
INDEXES: list[tuple] = [
    (0,), (-1,), (slice(1, None),), (slice(None, -1),), (slice(None, None, 2),),
    (slice(None, None, -1),), (None,), (Ellipsis, 0), (Ellipsis, slice(1, None)),
    (Ellipsis, None), (slice(None), 0), (0, slice(None, None, 2)), (slice(None), None),
]  # fmt: skip


def _with(shape: Shape, axis: int, size: int) -> Shape:
    return (*shape[:axis], size, *shape[axis + 1 :])


def _unique(values: Sequence[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if value not in seen:  # lists are unhashable: compare by value
            seen.append(value)
    return seen
