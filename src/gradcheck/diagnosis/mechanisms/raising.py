"""When a node's VJP raises: the inputs that make it raise, and the user's line (SPEC §6.1
`raises`).

The op is run alone on probe inputs that vary one thing the node's own inputs fix: its
`axis` (None or an int), its shapes (every axis one size, equal ranks, a size-1 batch
axis, non-square matrices). A region is the first condition that holds on exactly the
probes that raise ("only when axis=None"); "for every input" when all of them raise.
Where no condition separates them the hint says which probes raised, as `likely`. An
engine that raises on every input in the case's dtype is probed in float32 too.

The user's line is the last frame of the engine's own code in what it raised; a rule
that does not return (`hangs_hint`) is named with the line it was interrupted at.
"""

from __future__ import annotations

import dataclasses
import linecache
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...engines.driver import EngineFailure, Unsupported, engine_frames
from ...ops import ShapeError
from ...ops.broadcast import fmt_shape
from ...results import Hint
from .. import idiom
from ..localisation.localise import NodeCheck

SIZE = 3  # every axis of the probes, but the ones a probe varies
NODE_LIMIT = 1.0  # seconds a node alone may take when the case ran out of time
Shapes = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Probe:
    """One input of the op alone: its arguments' shapes (() for a literal) and attributes."""

    shapes: Shapes
    attrs: dict[str, Any]
    out: Any  # the op's output shape for them

    def describe(self) -> str:
        shapes = ", ".join(fmt_shape(s) for s in self.shapes)
        axis = f", axis={self.attrs['axis']!r}" if "axis" in self.attrs else ""
        return f"({shapes}{axis})"


@dataclass(frozen=True)
class Raising:
    """What a raising VJP raises, where in the user's code, and on which inputs."""

    exception: str  # "ValueError"
    where: str | None  # "ops.py:88": the last frame of the engine's own code
    line: str | None  # that line's source text
    region: str | None  # "only when axis=None", "for every input", ...; None: not probed
    separated: bool  # the region holds on every probe (not only a list of those that raise)
    dtype: str | None = None  # the one dtype it raises in, when it raises in no other

    @property
    def specific(self) -> bool:
        """The region is a condition on the op's inputs (its attributes, its shapes): one
        op's rule, where raising for every input, or in one dtype, may be code ops share."""
        return self.separated and any(self.region == says for says, _ in CONDITIONS)

    def says(self, op: str) -> str:
        at = f" at {self.where}" if self.where else ""
        source = f" (`{self.line}`)" if self.line else ""
        region = f" {self.region}" if self.region else ""
        return f"{op}'s VJP raises{region}: `{self.exception}`{at}{source}"


def user_frame(failure: EngineFailure) -> traceback.FrameSummary | None:
    """The last frame of the engine's own code in what it raised: not gradcheck's, not an
    installed library's."""
    cause = failure.__cause__
    if cause is None:
        return None
    own = engine_frames(cause)  # ends in a library's frame only where nothing else is left
    return own[-1] if own and "site-packages" not in own[-1].filename else None


def exception_name(failure: EngineFailure) -> str:
    cause = failure.__cause__
    return type(cause).__name__ if cause is not None else failure.message.split(":")[0]


def where(failure: EngineFailure) -> tuple[str | None, str | None]:
    """`file:line` of the user's frame, and that line's text."""
    frame = user_frame(failure)
    if frame is None:
        return None, None
    text = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
    return f"{Path(frame.filename).name}:{frame.lineno}", text or None


def raising_inputs(check: NodeCheck, *, probe: bool = True) -> Raising:
    """Why the node's VJP raises (`check.failure`): its exception, line and, if `probe`,
    region."""
    assert check.failure is not None
    place, text = where(check.failure)
    if not probe:
        return Raising(exception_name(check.failure), place, text, None, False)
    probes = _probes(check)
    dtype, *others = dtypes(check)
    outcomes = _outcomes(check, probes, dtype)
    region, separated = _region(check, outcomes)
    for other in others:  # an engine that works in float32 only raises on every float64
        found = _outcomes(check, probes, other) if region == "for every input" else []
        if found and not any(r for _, r in found):
            region = f"only in {dtype} (in {other}, on none of the probes)"
            return Raising(exception_name(check.failure), place, text, region, True, dtype.name)
        elif found and not all(r for _, r in found):
            region, separated = _region(check, found)
            region += f" in {other} (in {dtype}, for every input)"
    return Raising(exception_name(check.failure), place, text, region, separated)


def dtypes(check: NodeCheck) -> list[np.dtype]:
    """The dtypes to probe the engine in: the case's, then float32 (engines that work in
    float32 alone are common: TensorFlow's and PyTorch's defaults)."""
    own = check.cotangent.dtype
    return [own] if own == np.float32 else [own, np.dtype(np.float32)]


def _outcomes(check: NodeCheck, probes: list[Probe], dtype: np.dtype) -> list[tuple[Probe, bool]]:
    found = [(p, _raises(check, p, dtype)) for p in probes]
    return [(p, r) for p, r in found if r is not None]


def hangs_hint(check: NodeCheck, arg: int, limit: float, spell: str) -> Hint:
    """A node whose VJP did not return within `limit` seconds alone (SPEC §6.1 `hangs`)."""
    node, op = check.node, check.node.op
    assert op is not None and check.failure is not None
    place, text = where(check.failure)
    at = f", interrupted at {place}" + (f" (`{text}`)" if text else "") if place else ""
    return Hint(
        "op-vjp",
        f"{node.text}: {op.name}'s VJP for argument {arg} ({node.args[arg].text}) does not "
        f"return: checked alone, it was still running after {limit:g} s{at}",
        "make the rule return (a loop whose condition never changes, a recursion without "
        f"a base case): {op.name}'s VJP for {idiom.param(op, arg)} is "
        f"{idiom.rule(op, arg, spell)}",
        "likely",  # slow is not endless: what is known is that it ran past the limit
        op=op.name,
        node=node.text,
        arg=arg,
        mechanism="hangs",
    )


# -- the probes ------------------------------------------------------------------------


def _probes(check: NodeCheck) -> list[Probe]:
    """The node's own inputs first, then the variations its op accepts."""
    node, op = check.node, check.node.op
    assert op is not None
    own = tuple(
        tuple(check.inputs[f"a{i}"].shape) if f"a{i}" in check.inputs else ()
        for i in range(len(node.args))
    )
    if op.variadic or node.outputs is not None or any(a.integer for a in node.args):
        return [Probe(own, dict(node.attrs), node.shape)]  # indices and lists keep their shapes
    arrays = [i for i, a in enumerate(node.args) if not a.is_literal]
    cube = tuple((SIZE,) * len(s) if i in arrays else () for i, s in enumerate(own))
    shapes = [own, cube, *_equal_ranks(own, arrays), *_equal_ranks(cube, arrays)]
    shapes += [s for base in list(shapes) for s in _size1_batch(base, arrays)]
    shapes += _non_square(cube, arrays)
    attrs = [dict(node.attrs)]
    if "axis" in node.attrs:
        rank = len(own[arrays[0]]) if arrays else 0
        attrs += [{**node.attrs, "axis": a} for a in (None, *range(rank), -1)]
    probes: list[Probe] = []
    for shape in dict.fromkeys(shapes):
        for attr in attrs:
            probe = _accepted(op, shape, attr)
            if probe is not None and probe not in probes:
                probes.append(probe)
    return probes


def _accepted(op: Any, shapes: Shapes, attrs: dict[str, Any]) -> Probe | None:
    try:
        return Probe(shapes, attrs, op.shape(*shapes, **attrs))
    except (ShapeError, TypeError, ValueError):
        return None


def _equal_ranks(shapes: Shapes, arrays: list[int]) -> list[Shapes]:
    """Every array argument at the highest rank, its new leading axes the longest's."""
    top = max((shapes[i] for i in arrays), key=len, default=())
    if len({len(shapes[i]) for i in arrays}) < 2:
        return []
    return [tuple(top[: len(top) - len(s)] + s if i in arrays else s for i, s in enumerate(shapes))]


def _size1_batch(shapes: Shapes, arrays: list[int]) -> list[Shapes]:
    """One argument's first axis of size 1, where it is broadcast against another's."""
    if len(arrays) < 2:
        return []
    return [
        tuple((1, *s[1:]) if j == i else s for j, s in enumerate(shapes))
        for i in arrays
        if len(shapes[i]) >= 1 and shapes[i][0] != 1
    ]


def _non_square(shapes: Shapes, arrays: list[int]) -> list[Shapes]:
    """The last two axes made unequal: the same in every argument, or chained as a
    product's are ((2, 4) then (4, 6): no shape reads the same reversed)."""
    same = tuple((*s[:-2], 2, 3) if len(s) >= 2 else s for s in shapes)
    order = {i: k for k, i in enumerate(arrays)}
    chained = tuple(
        (*s[:-2], 2 + 2 * order[i], 4 + 2 * order[i]) if i in order and len(s) >= 2 else s
        for i, s in enumerate(shapes)
    )
    return [same, chained]


def _raises(check: NodeCheck, probe: Probe, dtype: np.dtype) -> bool | None:
    """Whether the engine's VJP raises on `probe` (None: it cannot run the op there)."""
    rng = np.random.default_rng([SIZE, len(probe.shapes)])
    inputs = {
        name: rng.uniform(0.5, 1.5, probe.shapes[int(name[1:])]).astype(dtype)
        for name in check.inputs
    }
    varied = dataclasses.replace(
        check, node=dataclasses.replace(check.node, attrs=probe.attrs, shape=probe.out)
    )
    cotangent = rng.standard_normal(probe.out).astype(dtype)
    try:
        varied.run(check.engine_factory, cotangent, inputs)
    except Unsupported:
        return None
    except EngineFailure:
        return True
    return False


# -- the region ------------------------------------------------------------------------

Condition = Callable[[NodeCheck, Probe], bool]


def _axis_none(check: NodeCheck, p: Probe) -> bool:
    return "axis" in p.attrs and p.attrs["axis"] is None


def _axis_int(check: NodeCheck, p: Probe) -> bool:
    return isinstance(p.attrs.get("axis"), int)


def _size1(check: NodeCheck, p: Probe) -> bool:
    """An argument's axis of size 1 that the output has longer (matrix axes aside: a
    product's last two axes are not broadcast)."""
    core = 2 if check.node.op is not None and check.node.op.name == "matmul" else 0
    out = tuple(p.out) if isinstance(p.out, tuple) else ()
    for shape in p.shapes:
        batch = shape[: len(shape) - core] if core and len(shape) >= core else shape
        aligned = out[: len(out) - core] if core else out
        if len(batch) > len(aligned):
            continue
        if any(d == 1 and o > 1 for d, o in zip(batch[::-1], aligned[::-1], strict=False)):
            return True
    return False


def _ranks_differ(check: NodeCheck, p: Probe) -> bool:
    return len({len(s) for s in p.shapes if s}) > 1


def _ranks_equal(check: NodeCheck, p: Probe) -> bool:
    return len([s for s in p.shapes if s]) > 1 and not _ranks_differ(check, p)


def _non_square_matrix(check: NodeCheck, p: Probe) -> bool:
    return any(len(s) >= 2 and s[-1] != s[-2] for s in p.shapes)


CONDITIONS: tuple[tuple[str, Condition], ...] = (
    ("only when axis=None", _axis_none),
    ("only when axis is an int", _axis_int),
    ("only when a batch axis has size 1", _size1),
    ("only when the arguments' ranks differ", _ranks_differ),
    ("only when the arguments' ranks are equal", _ranks_equal),
    ("only when a matrix is not square", _non_square_matrix),
)


def _region(check: NodeCheck, outcomes: list[tuple[Probe, bool]]) -> tuple[str, bool]:
    if len(outcomes) < 2:
        return "on the node's own inputs (no other input could be probed)", False
    if all(raised for _, raised in outcomes):
        return "for every input", True
    if not any(raised for _, raised in outcomes):
        return "on the node's own inputs only (on none of the probes)", False
    for says, holds in CONDITIONS:
        if all(holds(check, p) == raised for p, raised in outcomes):
            return says, True
    raised = [p.describe() for p, r in outcomes if r][:3]
    fine = [p.describe() for p, r in outcomes if not r][:3]
    return f"on some inputs: {', '.join(raised)} but not {', '.join(fine)}", False
