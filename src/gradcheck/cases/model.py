"""What a case file becomes once it is loaded and validated."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..expression import Expression
from ..util.lazy_numpy import np
from .dtypes import DEFAULT_TOLERANCES, widened
from .inputs import directions, draw_all, tangents

if TYPE_CHECKING:
    from .inputs import Given, Source

MODES = ("rev", "fwd")  # reverse mode (VJPs, SPEC §2) and forward mode (JVPs)
ORDERS = (1, 2)


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    @classmethod
    def for_dtype(cls, dtype: str) -> Tolerance:
        rtol, atol = DEFAULT_TOLERANCES[dtype]
        return cls(rtol, atol)


# One lock for every case's first draw: a program may check cases from several threads.
_DRAWING = threading.Lock()


@dataclass
class Case:
    """A valid case: its expression is parsed and shape-checked, its inputs checked.

    `sources` holds each input as the case file gave it: the `RandomSpec` or the `Given`
    numbers it is drawn from (or an array); `cotangent_source` and `expect_sources`
    likewise. Arrays are drawn when the case first needs them (`inputs`, `cotangent`,
    `expect`), so reading cases builds none, and dropped by `release()`, so a run holds
    the arrays of the cases it is running, not of every case it loaded. A case sent to
    another process carries its sources, and is drawn there: the same bits, by
    construction of the random streams (`cases.inputs`); a small case, once drawn, with
    its arrays instead.
    """

    name: str
    file: str
    line: int
    expr: str
    expression: Expression
    sources: dict[str, Source]
    wrt: list[str]
    dtype: str
    cotangent_source: Source
    tolerance: Tolerance
    seed: int
    tolerance_given: bool = False  # set in the case file or on the command line
    expect_sources: dict[str, Given] = field(default_factory=dict)  # `expect:`, float64
    tags: list[str] = field(default_factory=list)
    description: str | None = None
    reference: str | None = None  # tensorflow | numeric | both; None: the run's --reference
    timeout: float | None = None  # seconds for the engine, from `timeout:`; None: the run's
    modes: tuple[str, ...] | None = None  # rev and/or fwd; None: the run's --modes
    order: int | None = None  # 1, or 2 to check second order too; None: the run's --order
    # Tangents and directions v given rather than drawn: the float64 twin of a float16 or
    # bfloat16 case moves along the case's own, rounded ones.
    given_tangents: dict[str, np.ndarray] | None = None
    given_directions: dict[str, np.ndarray] | None = None
    _drawn: tuple[dict[str, np.ndarray], np.ndarray] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        return self._draw()[0]

    @property
    def cotangent(self) -> np.ndarray:
        return self._draw()[1]

    @property
    def expect(self) -> dict[str, np.ndarray]:
        """The gradients `expect:` pins, as float64 arrays."""
        return {name: pinned.draw() for name, pinned in self.expect_sources.items()}

    @property
    def elements(self) -> int:
        """How many input elements the case has, known without drawing them."""
        return sum(math.prod(v.shape) for v in self.sources.values())

    def release(self) -> None:
        """Drop the drawn arrays; the next use draws them again, bit for bit."""
        self._drawn = None

    def _draw(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        drawn = self._drawn
        if drawn is None:
            with _DRAWING:
                if self._drawn is None:
                    arrays = draw_all({**self.sources, _COTANGENT: self.cotangent_source})
                    cotangent = arrays.pop(_COTANGENT)
                    self._drawn = arrays, cotangent
                drawn = self._drawn
        return drawn

    def __getstate__(self) -> dict[str, Any]:
        # A large case travels as its sources (drawing is quicker than sending the arrays);
        # a small one, once drawn, with its arrays (sending them is quicker than drawing).
        small = self._drawn is not None and self.elements < SEND_DRAWN_ELEMENTS
        return {**self.__dict__, "_drawn": self._drawn if small else None}

    @property
    def wrt_inputs(self) -> list[str]:
        """The inputs in `wrt`: what forward mode and second order differentiate."""
        return [name for name in self.wrt if name in self.sources]

    def tangents(self) -> dict[str, np.ndarray]:
        """Forward mode's seeded tangent of each input in `wrt` (`inputs.tangents`)."""
        if self.given_tangents is not None:
            return self.given_tangents
        return tangents(self.seed, self.inputs, self.wrt_inputs)

    def directions(self) -> dict[str, np.ndarray]:
        """Second order's seeded direction v of each input in `wrt` (`inputs.directions`)."""
        if self.given_directions is not None:
            return self.given_directions
        return directions(self.seed, self.inputs, self.wrt_inputs)

    def widened(self) -> Case:
        """This case in float64, on its own inputs, cotangent, tangents and directions
        upcast: what a float16/bfloat16 case's exact answer is computed on."""

        def wide(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {n: widened(v) for n, v in arrays.items()}

        return replace(
            self,
            dtype="float64",
            sources=wide(self.inputs),
            cotangent_source=widened(self.cotangent),
            given_tangents=wide(self.tangents()),
            given_directions=wide(self.directions()),
        )


_COTANGENT = "@cotangent"  # the cotangent's key among the arrays drawn: no input's name
SEND_DRAWN_ELEMENTS = 100_000


@dataclass
class InvalidCase:
    """A case (or a whole file) that could not be loaded; `message` says what to change.

    `problems` holds each problem as (line, message), in the order of their lines; the
    first is at `line`, and `message` says them all, a line each (the first's without,
    the others' with their `file:line: `)."""

    name: str
    file: str
    line: int
    message: str
    expr: str = ""
    problems: list[tuple[int, str]] = field(default_factory=list)

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"
