"""Formula recovery (SPEC §6.1 `formula`): the rule an engine computes, as an expression.

At a node whose rule matches no other probe, the op is run ALONE on fresh, seeded inputs
and directions (`Recovery.probes`), and small expressions over the rule texts' names
(the parameters, `y`, the attributes, for a reduction `n`, small constants, the op's own
functions) are searched for one that reproduces the engine everywhere. The rule is taken
to be the direction times an elementwise factor (`g * f`; a reduction's `g` spread back
over x's shape, `np.broadcast_to(g.reshape(kept_shape), x.shape) * f`), so the search is
over `f` = what the engine gave / the direction. It is bottom-up by size, keeping one
expression per distinct value vector on the search probes (enumerative synthesis's value
deduplication), bounded in size, count and time. A candidate counts only if it holds on
held-out probes too: what is said is checked, never guessed.

Only ops whose rule is seen to be elementwise (a one-hot direction moves one element) and
the reductions over `axis` are searched; for the others (a convolution) recovery gives up
at once. `Recovery.holds` lends the probes to the `scaled` probe: a factor that fits one
node's inputs by accident (a shrunk one-element case) fails on the fresh ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ...cases.dtypes import machine_epsilon
from ...engines.driver import EngineFailure, EngineRun, Unsupported
from ...ops import ShapeError, unbroadcast
from ...ops.broadcast import expand_reduced, normalize_axes, sums_back
from ...ops.reductions import reduced_size, spread
from ..localisation.localise import NodeCheck
from . import synthesis
from .findings import Finding
from .synthesis import CONSTANTS, FUNCTIONS, Expr

SEARCH_ELEMENTS, HELD_OUT_ELEMENTS = 48, 16  # at least this many values in each
MIN_SEARCH, MIN_HELD_OUT, MAX_PROBES = 3, 2, 24


@dataclass
class Probe:
    """The node alone on fresh inputs: the engine's answer and the right one."""

    values: dict[str, np.ndarray]
    direction: Any
    got: EngineRun
    want: EngineRun


@dataclass(frozen=True)
class Recovered:
    got_rule: str  # what the engine computes, in the rule texts' names
    want_rule: str | None  # the op's own rule text for the argument
    fix: str  # the smallest visible edit that makes it right, or "replace ..."


class Recovery:
    """Probes of one failing node on fresh inputs, and the search over them."""

    def __init__(self, check: NodeCheck) -> None:
        self.check = check
        self.node, self.op = check.node, check.node.op
        self.rng = np.random.default_rng([len(check.node.text), 0xF0A1])

    # -- the probes --------------------------------------------------------------------
    @cached_property
    def family(self) -> str | None:
        """The op's kind: `elementwise` or `reduction` (searched), `other` (probed at its own
        shapes, never searched), or None: its inputs cannot be drawn afresh (indices,
        matrices it inverts), or the check is neither a VJP nor a JVP."""
        op = self.op
        if op is None or op.variadic or op.multi or op.integer or op.value_rule:
            return None
        if op.conditioned or op.symmetric or self.check.check not in ("vjp", "jvp"):
            return None
        if set(op.attrs) == {"axis", "keepdims"} and op.params == ("x",):
            return "reduction" if self.check.check == "vjp" else "other"
        return "elementwise" if self._diagonal() else "other"

    def _diagonal(self) -> bool:
        """Whether the right rule moves only the element its direction moves (elementwise)."""
        shapes = self._shapes(0, "elementwise")
        values = self._values(shapes)
        out = self._output_shape(shapes)
        if out is None or out != self.node.shape or not values:
            return False
        hot = np.zeros(out, self._dtype)
        hot.flat[int(self.rng.integers(hot.size))] = 1
        try:
            direction = {n: hot for n in values} if self.check.check == "jvp" else hot
            want = self.check.right(direction, values)
        except (EngineFailure, Unsupported, ShapeError):
            return False
        return all(np.shape(w) == out and not (w * (hot == 0)).any() for w in want.grads.values())

    def _shapes(self, k: int, family: str | None) -> dict[str, tuple[int, ...]]:
        """Each input's shape at probe `k`: an elementwise op's at the output's (no sum back
        in the way), a reduction's with other sizes on its axes (so that `n` varies)."""
        node = self.node
        names = {f"a{i}": arg.shape for i, arg in enumerate(node.args) if not arg.is_literal}
        if family == "elementwise":
            return {name: node.shape for name in names}
        if family == "reduction":
            ((name, shape),) = names.items()
            axes = normalize_axes(node.attrs["axis"], len(shape))
            return {name: tuple(2 + (k + a) % 4 if a in axes else d for a, d in enumerate(shape))}
        return names

    def _output_shape(self, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...] | None:
        args = [shapes.get(f"a{i}", ()) for i in range(len(self.node.args))]
        try:
            return tuple(self.op.shape(*args, **self.node.attrs))
        except (ShapeError, TypeError, ValueError):
            return None

    def _values(self, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
        dtype = self._dtype
        out = {}
        for name, shape in shapes.items():
            param = self.op.params[int(name[1:])]
            domain = self.op.domain.get(param)
            low, high, gap = -2.0, 2.0, 0.0
            if domain is not None:
                low, high, gap = max(low, domain.low), min(high, domain.high), domain.gap
            v = self.rng.uniform(low, high, shape)
            v = np.where(np.abs(v) < gap, np.copysign(gap, v) + v, v)
            out[name] = v.astype(dtype)
        return out

    @property
    def _dtype(self) -> Any:
        c = self.check.cotangent
        return next(iter(c.values())).dtype if isinstance(c, dict) else c.dtype

    def _direction(self, values: dict[str, np.ndarray], out: tuple[int, ...]) -> Any:
        """A direction away from zero (the search divides by it), signs mixed."""

        def draw(shape):
            v = self.rng.uniform(0.5, 1.5, shape) * self.rng.choice([-1.0, 1.0], shape)
            return v.astype(self._dtype)

        if self.check.check == "jvp":
            return {name: draw(v.shape) for name, v in values.items()}
        return draw(out)

    @cached_property
    def probes(self) -> list[Probe]:
        """Fresh probes of the node alone (seeded): enough for `SEARCH_ELEMENTS` values in
        the search and `HELD_OUT_ELEMENTS` held out; [] where the family has none."""
        if self.family is None:
            return []
        probes = []
        for k in range(self._count(SEARCH_ELEMENTS, MIN_SEARCH) + self.held_out):
            shapes = self._shapes(k, self.family)
            out = self._output_shape(shapes)
            if out is None:
                return []
            values = self._values(shapes)
            direction = self._direction(values, out)
            try:
                got = self.check.run(self.check.engine_factory, direction, values)
                want = self.check.right(direction, values)
            except (EngineFailure, Unsupported, ShapeError):
                return []
            probes.append(Probe(values, direction, got, want))
        return probes

    @property
    def held_out(self) -> int:
        """How many of `probes` (the last ones) the search never sees."""
        return self._count(HELD_OUT_ELEMENTS, MIN_HELD_OUT)

    def _count(self, elements: int, least: int) -> int:
        """Probes enough for `elements` values of the node's size (a one-element node
        needs many), at least `least`."""
        size = max(1, math.prod(self.node.shape))
        return min(MAX_PROBES, max(least, -(-elements // size)))

    def holds(self, arg: int, expected: Callable[[Probe, np.ndarray], np.ndarray]) -> bool | None:
        """Whether the engine gives `expected(probe, right answer)` for `arg` at every
        fresh probe; None when the node cannot be probed afresh."""
        if not self.probes:
            return None
        name = f"a{arg}"
        for probe in self.probes:
            got, want = probe.got.grads.get(name), probe.want.grads[name]
            if got is None or got.shape != want.shape:
                return False
            wanted = expected(probe, want.astype(np.float64))
            if wanted.shape != got.shape or not self.check.same(wanted, got.astype(np.float64)):
                return False
        return True

    def passed(self, probe: Probe, arg: int, shape: tuple[int, ...]) -> np.ndarray:
        """The probe's direction handed on unchanged, in the shape `shape` (`identity`)."""
        if self.check.check == "jvp":
            return np.broadcast_to(probe.direction[f"a{arg}"], shape)
        g = probe.direction
        return unbroadcast(g, shape) if sums_back(g.shape, shape) else g

    # -- the search ----------------------------------------------------------------------
    @property
    def searchable(self) -> bool:
        """Whether a small expression can say the rule (float16's rounding would leave
        every candidate "close": no search there)."""
        precise = machine_epsilon(self._dtype) <= machine_epsilon(np.float32)
        return precise and self.family in ("elementwise", "reduction")

    def recover(self, arg: int) -> Recovered | None:
        """The rule the engine computes for `arg`, verified on the held-out probes."""
        if not self.searchable or not self.probes:
            return None
        columns = self._columns(arg)
        if columns is None:
            return None
        search, held = columns
        found = synthesis.search(search, held, self._leaves(), self._functions(), self._rtol)
        if found is None:
            return None
        mode = "fwd" if self.check.check == "jvp" else "rev"
        base = self.check.words.symbol
        if self.family == "reduction":
            base = "np.broadcast_to(g.reshape(kept_shape), x.shape)"
        got_rule = synthesis.rule_text(base, found)
        fix = synthesis.fix(found, search, held, self._rtol)
        fix = fix or f"replace `{got_rule}` by the right rule"
        return Recovered(got_rule, self.op.rule(arg, mode=mode), fix)

    @property
    def _rtol(self) -> float:
        return max(1e-9, 1e3 * machine_epsilon(self._dtype))

    def _columns(self, arg: int):
        """For the search probes and the held-out ones: each name's values, the engine's
        factor `f` ("target") and the right one ("right"), flat and concatenated."""
        name = f"a{arg}"
        rows: list[dict[str, np.ndarray]] = []
        for probe in self.probes:
            got, want = probe.got.grads.get(name), probe.want.grads[name]
            if got is None or got.shape != want.shape:
                return None
            env = self._env(probe)
            d = self._spread(probe, name)
            with np.errstate(all="ignore"):
                env["target"] = got.astype(np.float64) / d
                env["right"] = want.astype(np.float64) / d
            if not np.isfinite(env["target"]).all():
                return None
            rows.append({k: np.broadcast_to(v, d.shape).ravel() for k, v in env.items()})
        cut = len(rows) - self.held_out
        join = lambda part: {k: np.concatenate([r[k] for r in part]) for k in part[0]}
        return join(rows[:cut]), join(rows[cut:])

    def _spread(self, probe: Probe, name: str) -> np.ndarray:
        """The direction as the rule multiplies it, in the argument's shape."""
        if self.check.check == "jvp":
            return probe.direction[name].astype(np.float64)
        g = probe.direction.astype(np.float64)
        if self.family == "reduction":
            x = probe.values[name]
            return spread(g, x, self.node.attrs["axis"], self.node.attrs["keepdims"])
        return g

    def _env(self, probe: Probe) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = {}
        for i, (param, arg) in enumerate(zip(self.op.params, self.node.args, strict=True)):
            value = arg.literal if arg.is_literal else probe.values[f"a{i}"]
            env[param] = np.asarray(value, np.float64)
        y = probe.want.forward.astype(np.float64)
        if self.family == "reduction":
            x, attrs = probe.values["a0"], self.node.attrs
            env["y"] = expand_reduced(y, x.shape, attrs["axis"], attrs["keepdims"])
            env["n"] = np.asarray(float(reduced_size(x.shape, attrs["axis"])))
        else:
            env["y"] = y
        for key, value in self.node.attrs.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                env[key] = np.asarray(float(value))
        return env

    def _leaves(self) -> list[Expr]:
        names = [*self.op.params, "y", *(["n"] if self.family == "reduction" else [])]
        attrs = self.node.attrs
        names += [k for k, v in attrs.items() if type(v) in (int, float)]
        return [("name", n) for n in names] + [("const", c) for c in CONSTANTS]

    def _functions(self) -> list[str]:
        """The op family's functions: those its rule texts and its name mention."""
        texts = " ".join([*(self.op.rules or ()), *(self.op.jvp_rules or ()), self.op.name])
        return [f for f in FUNCTIONS if f"np.{f}(" in texts or f == self.op.name]


def formula_finding(
    recovery: Recovery | None, arg: int | None, want: np.ndarray, got: np.ndarray
) -> Finding:
    """The `formula` finding of `arg`: the recovered rule where one holds on every probe,
    else the worst element, saying where its numbers come from (SPEC §6.1)."""
    found = recovery.recover(arg) if recovery is not None and arg is not None else None
    if found is not None:
        right = f"the right rule is `{found.want_rule}`"
        if not found.want_rule:  # a user op declared without rule texts
            right = f"the right {recovery.check.words.rule} differs"
        return Finding(
            "formula",
            f"computes `{found.got_rule}`; {right}",
            found.fix,
            got_rule=found.got_rule,
            want_rule=found.want_rule,
        )
    with np.errstate(invalid="ignore"):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), want.shape))
    searched = recovery is not None and recovery.searchable
    return Finding(
        "formula",
        "computes another formula"
        + (", which no small expression reproduces" if searched else "")
        + f": checked alone on its own inputs, at index {index} it gives "
        f"{float(got[index]):.6g} where {float(want[index]):.6g} is right",
        "compute the derivative the op's rule gives",
        "likely",
    )
