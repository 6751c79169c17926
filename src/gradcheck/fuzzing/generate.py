"""Random cases over the op registry, as Hypothesis strategies (SPEC §10).

A case is grown as a small program from one fresh input: each step applies an op to
the newest value (or an earlier one) and completes it with one of the ways the op's
shape rule allows (`proposals.completions`): other arguments, fresh inputs that
broadcast or contract, reused values (diamonds, ``x * x``), literals; attributes. The
last value is the output. A fresh input is drawn inside the domain the registry
declares for the parameter it feeds (`Op.domain`; the first input, in one of the ops'
domains), on a grid: in [-2, 2] by sixteenths (no subnormals, exact in every dtype),
or, in a quarter of the cases when a kinked op (or prod, `Op.zeros`) may occur, as small
integers, which put relu and abs at 0, max, min, maximum and minimum at ties and prod's
factors at zero on purpose. Then
`domain.admissible` runs the builtin engine and keeps only the cases where every op's
arguments really lie inside its domain and away from its kinks (at them exactly when
kinks are the target). A fresh square input of an op that inverts it (`Op.conditioned`)
is made diagonally dominant (symmetric too for cholesky's, `Op.symmetric`). An integer
parameter (take's indices, `Op.integer`) takes a fresh integer input, each value inside
the range the op may index (`Op.index_range`), and small axes make indices repeat; a
parameter whose values are ruled (`Op.value_rule`: labels that sum to 1) takes a fresh
input made to comply. Neither is swapped with another argument or reused as a value.

Every choice is drawn so that Hypothesis' smaller means simpler: fewer steps, the first
op of the list, the newest value, lower ranks, axes of size 1, the first completion,
values 1, -1, 2, ... before fractions, dtype as listed first, random cotangents.
`_Builder` says how the choices are laid out for the shrinker.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from ..cases.dtypes import DTYPES
from ..cases.loader import load_case
from ..cases.model import Case, InvalidCase
from ..engines.driver import EngineRun
from ..ops import Interval, Op, Shape, ShapeError, get_op
from .domain import Unfair, admissible, make_dominant
from .program import Apply, Leaf, Literal, Program, Value
from .proposals import (
    MAX_DIM,
    MAX_NODE_ELEMENTS,
    Completion,
    Constant,
    Fresh,
    Reuse,
    completions,
    first_ranks,
)

SMOOTH = (2, 16)  # values in [-2, 2] in steps of 1/16
KINKS = (3, 1)  # whole numbers in [-3, 3]
LITERALS = (3, 2)  # literal constants: halves in [-3, 3], never 0
DEFAULT_DTYPES = ("float64", "float32")
DEFAULT_MAX_OPS = 4
DEFAULT_MAX_RANK = 3


@dataclass(frozen=True)
class Space:
    """What may be generated: these ops, at most `max_ops` of them, ranks up to `max_rank`."""

    ops: tuple[str, ...]
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    max_ops: int = DEFAULT_MAX_OPS
    max_rank: int = DEFAULT_MAX_RANK
    # Ops at whose kinks the engine declares a convention of its own (SPEC §4): their
    # kinks are no target, TensorFlow's convention not being what the engine follows.
    own_conventions: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.ops:
            raise ValueError("no ops to generate cases from")
        for dtype in self.dtypes:
            if dtype not in DTYPES:
                raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        if self.max_ops < 1 or self.max_rank < 0:
            raise ValueError("max_ops must be >= 1 and max_rank >= 0")
        if not any(first_ranks(op, self.max_rank) for op in self.ops):  # conv2d at rank 3
            need = min((r for r in range(self.max_rank + 1, 7) for op in self.ops
                        if first_ranks(op, r)), default=None)  # fmt: skip
            raise ValueError(
                f"no op of {', '.join(self.ops)} applies to an input of rank {self.max_rank} or "
                f"less" + (f": --max-rank {need} is needed" if need else "")
            )

    @property
    def has_kinks(self) -> bool:
        """Whether some op has kinks or a special case at zero (prod): then a quarter of
        the cases draw whole numbers."""
        return any(get_op(name).kink or get_op(name).zeros for name in self.ops)


@dataclass
class Example:
    """One generated case: its program, the case as case-file keys and as loaded, and the
    builtin engine's run of it (the quick reference; None for a user op without VJPs)."""

    program: Program
    data: dict[str, Any]
    case: Case
    builtin: EngineRun | None


def examples(
    space: Space, on_reject: Callable[[], None] | None = None
) -> st.SearchStrategy[Example]:
    """Cases over `space` whose every op sits inside its domain; `on_reject` is called
    for each program thrown away for leaving it."""
    return _examples(space, on_reject)


@st.composite
def _examples(draw: st.DrawFn, space: Space, on_reject: Callable[[], None] | None) -> Example:
    program = draw(programs(space))
    data = program.case_data()
    case = load_case(data, file="<fuzz>")
    if isinstance(case, InvalidCase):  # the generator's own bug: say it loudly
        raise AssertionError(f"generated an invalid case: {case.message}\n{data}")
    try:
        builtin = admissible(case, kinks=program.kinks, own_conventions=space.own_conventions)
    except Unfair:
        if on_reject:
            on_reject()
        reject()
    return Example(program, data, case, builtin)


@st.composite
def programs(draw: st.DrawFn, space: Space) -> Program:
    head = draw(_binary(2))
    dtype = space.dtypes[_scaled(head[0], len(space.dtypes))]
    kinks = space.has_kinks and _scaled(head[1], 4) == 3
    builder = _Builder(draw, space, kinks)
    builder.start()
    while builder.step():
        pass
    if builder.output is None:
        reject()
    # The cotangent: random (more sensitive, and the simplest choice) three times in 4.
    tail = draw(_binary(3))
    ones = _scaled(tail[0], 4) == 3
    seed = 0 if ones else int.from_bytes(tail[1:], "big")
    return Program(builder.output, dtype, "ones" if ones else "random", seed, kinks)


class _Builder:
    """Starts from one fresh input and draws one step at a time.

    Every choice is a byte scaled to the options there are. A step is three draws at
    most, which Hypothesis' shrinker deletes together (it deletes up to five), the step
    after taking the deleted step's first argument: which op, or no more steps (an
    eighth of the values, for every step after the first); three bytes: which first
    argument (the newest value three times in 4), the kind of the other arguments
    (fresh inputs, reused values, a literal: reuse, rare among the completions, is a
    third of the draws), one completion of that kind and whether to swap two arguments
    (``y / x`` as well as ``x / y``, ``exp(h) * h`` as well as ``h * exp(h)``); the
    values of a fresh argument or a literal. Options are counted so that a
    choice names the same thing when the shrinker deletes a later step (reused values
    from the oldest).
    """

    def __init__(self, draw: st.DrawFn, space: Space, kinks: bool) -> None:
        self.draw = draw
        self.space = space
        self.kinks = kinks
        self.values: list[Value] = []  # inputs and op results so far, newest last
        self.output: Apply | None = None
        self.steps = 0

    def start(self) -> None:
        """The first input: of a rank some op takes, drawn in one of the ops' domains."""
        ops = self.space.ops
        ranks = sorted({r for op in ops for r in first_ranks(op, self.space.max_rank)}) or [0]
        intervals = _first_intervals(ops)
        rank = ranks[_scaled(self._byte(), len(ranks))]  # a byte on its own: see _binary
        interval = intervals[_scaled(self._byte(), len(intervals))]
        shape = tuple(1 + _scaled(b, MAX_DIM) for b in self.draw(_binary(rank)))
        self.values.append(self._leaf(shape, interval))

    def step(self) -> bool:
        """One more step; False for no more. The op is drawn even past the last step, so
        that a program that had as many steps as allowed reads the same with one fewer."""
        ops = self.space.ops
        which = self._byte()
        if self.steps == self.space.max_ops or (self.steps and which < 32):
            return False
        self.steps += 1
        op = get_op(ops[which % len(ops)])  # modulo: every op is reached, whatever their number
        where, kind, option = self.draw(_binary(3))
        first = self.values[-1 - where % len(self.values) if where >= 192 else -1]
        earlier = tuple(v.shape for v in self.values)
        options = completions(op.name, first.shape, earlier, self.space.max_rank)
        if not options:
            return True
        kinds = _by_kind(options)
        group = kinds[_scaled(kind, len(kinds))]
        swap = option & 1  # a bit of its own: the same whatever the options
        chosen = group[(option >> 1) % len(group)]
        shapes = (first.shape, *(s.shape for s in chosen.rest))
        attrs = {**op.attrs, **dict(chosen.attrs)}
        args = [
            first,
            *(self._source(s, op, i, shapes, attrs) for i, s in enumerate(chosen.rest, 1)),
        ]
        args = [self._conditioned(a, op, i) for i, a in enumerate(args)]
        # A reused value comes first unless swapped: `h * exp(h)`, as one writes it.
        reused_first = isinstance(chosen.rest[0], Reuse) if chosen.rest else False
        if swap != reused_first and len(args) == 2 and _swappable(op, args, chosen):
            args.reverse()
        node = Apply(op, tuple(args), dict(chosen.attrs), chosen.shape, chosen.part)
        # An integer input is no value to reuse: only an integer parameter may take it.
        fresh = [a for a in args if isinstance(a, Leaf) and a.dtype is None]
        self.values += [a for a in fresh if a not in self.values]
        self.values.append(node)
        self.output = node
        return True

    def _source(
        self, source: Fresh | Constant | Reuse, op: Op, position: int, shapes: tuple, attrs: dict
    ) -> Value:
        if isinstance(source, Reuse):
            return self.values[source.index]
        if isinstance(source, Constant):
            grid = _grid(_interval(op, position), *LITERALS, nonzero=True)
            return Literal(grid[_scaled(self._byte(), len(grid))])
        param = op.params[0] if op.variadic else op.params[position]
        if param in op.integer:
            return self._indices(source.shape, op, shapes, attrs)
        leaf = self._leaf(source.shape, _interval(op, position))
        rule = op.value_rule
        if rule is not None and param in rule.params:  # labels that must sum to 1
            return Leaf(leaf.shape, rule.make(param, leaf.values, *shapes, **attrs))
        return leaf

    def _indices(self, shape: Shape, op: Op, shapes: tuple, attrs: dict[str, Any]) -> Leaf:
        """A fresh integer input, each value in the range the op may index: drawn from the
        few values a small axis has, indices repeat (a scatter must accumulate them)."""
        low, high, _ = op.index_range(*shapes, **attrs)
        size = math.prod(shape)
        values = self.draw(_bytes(size))[:size]
        return Leaf(shape, tuple(low + _scaled(b, high - low) for b in values), "int64")

    def _leaf(self, shape: tuple[int, ...], interval: Interval) -> Leaf:
        grid = _grid(interval, *(KINKS if self.kinks else SMOOTH))
        size = math.prod(shape)
        values = self.draw(_bytes(size))[:size]  # one choice for all the elements
        return Leaf(shape, tuple(grid[_scaled(b, len(grid))] for b in values))

    def _conditioned(self, value: Value, op: Op, position: int) -> Value:
        """A fresh square input an op inverts (`Op.conditioned`, `Op.symmetric`) made
        diagonally dominant, where no op has used it yet; any other value as it is."""
        param = None if op.variadic else op.params[position]
        shape = getattr(value, "shape", ())
        if (
            param not in (*op.conditioned, *op.symmetric)
            or not isinstance(value, Leaf)
            or len(shape) < 2
            or shape[-1] != shape[-2]
            or any(value in v.args for v in self.values if isinstance(v, Apply))
        ):
            return value
        made = Leaf(shape, make_dominant(shape, value.values, param in op.symmetric))
        self.values = [made if v is value else v for v in self.values]
        return made

    def _byte(self) -> int:
        return self.draw(_binary(1))[0]


def _swappable(op: Op, args: list[Value], chosen: Completion) -> bool:
    if op.variadic or op.integer or op.value_rule:  # indices and labels stay in place
        return False
    try:
        attrs = {**op.attrs, **dict(chosen.attrs)}  # every attribute, as the parser gives
        return op.shape(args[1].shape, args[0].shape, **attrs) == chosen.shape
    except ShapeError:
        return False


def _scaled(byte: int, count: int) -> int:
    """A byte as one of `count` (at most 256) options; 0 stays 0."""
    return byte * count >> 8


@cache
def _bytes(size: int) -> st.SearchStrategy[bytes]:
    """At least `size` bytes, of which the first `size` are used. Not exactly `size`: a
    longer value fits a smaller size too, so that when the shrinker makes a shape
    smaller, the values stay what they were (but fewer) instead of starting over."""
    return st.binary(min_size=size, max_size=max(size, MAX_NODE_ELEMENTS))


@cache
def _binary(size: int) -> st.SearchStrategy[bytes]:
    """`size` choices of a byte each, in one draw: fewer draws cost less of Hypothesis'
    overhead. A byte drawn alone is uniform; in longer draws a quarter of them are 0,
    which is fine where 0 is the simplest option and common does no harm (the newest
    value, a fresh input, the first completion), not for a rank or for whether to go on."""
    return st.binary(min_size=size, max_size=size)


def _by_kind(options: tuple[Completion, ...]) -> list[list[Completion]]:
    groups: dict[tuple[type, ...], list[Completion]] = {}
    for option in options:
        groups.setdefault(tuple(type(s) for s in option.rest), []).append(option)
    return list(groups.values())


@cache
def _first_intervals(ops: tuple[str, ...]) -> list[Interval]:
    """Where the first input may be drawn: anywhere, or in the domain of some op's first
    parameter (log's, sqrt's, ...), the op that will take it not being drawn yet."""
    return list(dict.fromkeys([Interval(), *(_interval(get_op(name), 0) for name in ops)]))


def _interval(op: Op, position: int) -> Interval:
    param = op.params[0] if op.variadic else op.params[position]
    return op.domain.get(param, Interval())


@cache
def _grid(interval: Interval, bound: float, per_unit: int, nonzero: bool = False) -> list[float]:
    """The values of the grid (`per_unit` steps per unit, within ±`bound`) in `interval`,
    simplest first: whole numbers by size, then halves, quarters, ... Except that 0
    comes after the other whole numbers: a zero input makes terms vanish, which hides
    bugs and blurs which bug it is (at x = 0, ``g * x`` and ``g * x * y`` agree)."""
    low = max(interval.low, -bound) * per_unit
    high = min(interval.high, bound) * per_unit
    steps = range(math.ceil(low), math.floor(high) + 1)
    values = [k / per_unit for k in steps if (k or not nonzero) and interval.contains(k / per_unit)]
    if not values:  # an interval narrower than the grid: its middle
        values = [(max(interval.low, -bound) + min(interval.high, bound)) / 2]
    return sorted(values, key=lambda v: (_denominator(v), v == 0, abs(v), v < 0))


def _denominator(value: float) -> int:
    return value.as_integer_ratio()[1]
