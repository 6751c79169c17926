"""Mechanism probes: what is wrong with the VJP of a node that fails alone (SPEC §6.1).

The engine's rule for the node is run again on controlled cotangents and compared with
the right VJP (the builtin engine's): a second random cotangent (does the answer move
with it?), their combination (is it linear?), then what relates the two answers
(zero, the cotangent itself, a factor, swapped axes, a shape), where the NaNs are, and
every catalogue variant of the op run on the node alone. Only when none fits is the
mechanism `formula`, with the right and the wrong number at the worst element. Probe,
don't guess: each mechanism below is something the engine was seen to do.

The probes speak of "the rule" and "its direction" through the check they probe: a
`NodeCheck` runs VJPs on cotangents; `diagnosis.modes.forward`'s check runs JVPs on tangents,
`diagnosis.modes.second_order`'s the VJP differentiated again, on directions v, each with
the words and the probes that apply to it (`Prober.probes`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

import numpy as np

from ...cases.dtypes import machine_epsilon
from ...engines.driver import EngineFailure, EngineRun, Unsupported
from ...ops import ShapeError, unbroadcast
from ...ops.broadcast import fmt_shape, sums_back
from ..faults.planted import CATALOGUE, Fault, FaultyEngine
from ..localisation.localise import NodeCheck
from . import windows
from .findings import Finding
from .formula import Recovery, formula_finding
from .patterns import layout
from .patterns import nice as nice_factor
from .regions import describe

# Which elements of the argument's gradient a probe describes: `where(want, got)`.
Where = Callable[[np.ndarray, np.ndarray], np.ndarray]
# Coefficients of the linearity probe: vjp(A*g1 + B*g2) must be A*vjp(g1) + B*vjp(g2).
A, B = 0.75, -1.5


@dataclass
class Prober:
    """The probes of one failing node; each extra engine run is made once, when needed."""

    check: NodeCheck
    conventions: dict[str, str] = field(default_factory=dict)

    @cached_property
    def second(self) -> tuple[Any, EngineRun, EngineRun] | None:
        """Another random direction, and what the engine and the reference make of it."""
        rng = np.random.default_rng([len(self.check.node.text), 0x5EC0])
        g2 = self.check.random_direction(rng)
        got = self._engine(g2)
        return None if got is None else (g2, got, self.check.right(g2))

    @cached_property
    def combined(self) -> EngineRun | None:
        """The engine on A*g1 + B*g2."""
        if self.second is None:
            return None
        return self._engine(self.check.combine(A, self.check.cotangent, B, self.second[0]))

    @cached_property
    def fingerprints(self) -> dict[int, list[Fault]]:
        """For each argument: the catalogue faults of the node's op that reproduce the
        engine's VJP of the node alone, on the first cotangent and then on the second
        (asked for only for the faults that passed the first)."""
        check, op = self.check, self.check.node.op
        assert op is not None and check.got is not None and check.want is not None
        found: dict[int, list[Fault]] = {}
        for fault in CATALOGUE:
            if fault.driver is not None or fault.check != check.check or op.name not in fault.ops:
                continue
            factory = lambda f=fault: FaultyEngine(f, self.conventions)
            first = self._reference(factory, check.cotangent)
            args = self._reproduced(first, check.got, check.want)
            if args and self.second is not None:
                g2, got2, want2 = self.second
                args &= self._reproduced(self._reference(factory, g2), got2, want2)
            for arg in sorted(args):
                found.setdefault(arg, []).append(fault)
        return found

    def _reproduced(self, faulty: EngineRun | None, got: EngineRun, want: EngineRun) -> set[int]:
        """The arguments whose gradient the faulty run reproduces, where it is not right."""
        if faulty is None:
            return set()
        return {
            int(name[1:])
            for name in self.check.names
            if self.check.same(faulty.grads[name], got.grads[name])
            and not self.check.same(faulty.grads[name], want.grads[name])
        }

    def _region(self, arg: int, mask: np.ndarray, where: Where) -> str:
        """Where `mask` lies, in terms of the node's inputs, probed on a grid if need be."""
        check = self.check
        output = check.want.forward if check.want else None
        return describe(mask, check.node, check.inputs, output, self._grid(arg, where))

    def _grid(self, arg: int, where: Where):
        """A probe for `describe`: the node on other inputs, `where(want, got)` for `arg`."""
        check, op = self.check, self.check.node.op
        assert op is not None

        def probe(values: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
            shapes = [values[n].shape if n in values else () for n in _arg_names(check)]
            try:
                out = op.shape(*shapes, **check.node.attrs)
                cotangent = check.unit_direction(out, values)
                got = check.run(check.engine_factory, cotangent, values)
                want = check.right(cotangent, values)
            except (ShapeError, EngineFailure, Unsupported):
                return None
            name = f"a{arg}"
            if got.grads[name].shape != want.grads[name].shape:
                return None
            return where(want.grads[name], got.grads[name]), want.forward

        return None if op.variadic else probe

    def _engine(self, cotangent: np.ndarray) -> EngineRun | None:
        try:
            return self.check.run(self.check.engine_factory, cotangent)
        except (EngineFailure, Unsupported):
            return None

    def _reference(self, factory, cotangent: np.ndarray) -> EngineRun | None:
        try:
            return self.check.run(factory, cotangent)
        except EngineFailure:  # a fault that does not apply to these shapes
            return None

    # -- the probes, in order: the first that fits is the mechanism ----------------------
    def probes(self) -> tuple[Callable[[int, np.ndarray, np.ndarray], Finding | None], ...]:
        return (
            self._fingerprint,
            partial(windows.find, self),  # pools, convolutions, gathers, roll, cumsum
            self._shape,
            self._nan_region,
            self._zero,
            self._ignores_upstream,
            self._not_linear,
            self._identity,
            self._scaled,
            self._transposed,
        )

    def find(self, arg: int) -> Finding:
        check = self.check
        assert check.want is not None and check.got is not None
        name = f"a{arg}"
        want, got = check.want.grads[name], check.got.grads[name]
        for probe in self.probes():
            finding = probe(arg, want, got)
            if finding is not None:
                return finding
        return self._formula(want, got, arg)

    @cached_property
    def recovery(self) -> Recovery:
        """The node on fresh inputs, and the search for the rule it computes there."""
        return Recovery(self.check)

    def _holds(self, arg: int, expected) -> bool | None:
        """Whether a verdict on the node's inputs holds on fresh ones (None: none drawn)."""
        return self.recovery.holds(arg, expected) if self.check.check in ("vjp", "jvp") else True

    def _fingerprint(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        faults = self.fingerprints.get(arg)
        if not faults:
            return None
        fault = faults[0]
        return Finding(
            fault.code,
            f"is the catalogue's {fault.name}: {fault.summary}",
            fault.fix,
        )

    def _shape(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        if want.shape == got.shape:
            return None
        whose = self.check.words.result
        shapes = f"shape {fmt_shape(got.shape)}, not {whose} {fmt_shape(want.shape)}"
        lead = f"return the {self.check.words.flow} in {whose} own shape"
        if sums_back(want.shape, got.shape) and self.check.same(
            want, np.broadcast_to(got, want.shape)
        ):
            return Finding(
                "shape",
                f"gives the right values in {shapes}: it was never broadcast to that shape",
                f"{lead}: broadcast it (`np.broadcast_to(t, y.shape)`)",
            )
        if sums_back(got.shape, want.shape) and self.check.same(want, unbroadcast(got, want.shape)):
            extra = got.ndim - want.ndim
            if extra > 0 and all(d == 1 for d in got.shape[:extra]):
                what = (
                    f"has {extra} extra leading size-1 axes (summed with keepdims, never dropped)"
                )
                how = f"drop them (reshape to {fmt_shape(want.shape)})"
            else:
                what = "has the broadcast shape: it was never summed back (unbroadcast missing)"
                how = "sum over the axes broadcasting added, and with keepdims=True over the "
                how += "axes where the argument has size 1"
            return Finding(
                "shape", f"gives the right values in {shapes}: it {what}", f"{lead}: {how}"
            )
        if got.size == want.size and self.check.same(want, got.reshape(want.shape)):
            what, how = layout(got.shape, want.shape)
            return Finding(
                "shape", f"gives the right values in {shapes}: it {what}", f"{lead}: {how}"
            )
        return Finding(
            "shape",
            f"gives {shapes}, and its values do not match after reshaping either",
            lead,
            "likely",
        )

    def _nan_region(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        bad = _nan_where(want, got)
        if not bad.any() or not (self.check.close(want, got) | bad).all():
            return None
        region = self._region(arg, bad, _nan_where)
        return Finding(
            "nan-region",
            f"gives NaN/Inf where {region}, where the right VJP is finite (and is right elsewhere)",
            f"compute the derivative without dividing by zero or overflowing where {region}",
            region=region,
        )

    def _ignores_upstream(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        if self.second is None:
            return None
        _, got2, want2 = self.second
        name = f"a{arg}"
        if name not in got2.grads or got2.grads[name].shape != got.shape:
            return None
        if self.check.same(got, got2.grads[name]) and not self.check.same(want, want2.grads[name]):
            words = self.check.words
            return Finding(
                "ignores-upstream",
                f"ignores its {words.upstream}: two different {words.direction}s give the same "
                "answer",
                f"multiply the local derivative by the {words.upstream} {words.symbol} "
                "(the chain rule)",
            )
        return None

    def _not_linear(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        if self.combined is None or self.second is None:
            return None
        name = f"a{arg}"
        got2, got3 = self.second[1].grads.get(name), self.combined.grads.get(name)
        if got2 is None or got3 is None or got3.shape != got.shape:
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            parts = [A * got.astype(np.float64), B * got2.astype(np.float64)]
        if not all(np.isfinite(p).all() for p in parts):
            return None
        eps = machine_epsilon(got.dtype) if got.dtype.kind == "f" else 0.0
        rtol = max(self.check.tolerance.rtol, 64 * eps)
        bound = self.check.tolerance.atol + rtol * (np.abs(parts[0]) + np.abs(parts[1]))
        if np.all(np.abs(got3 - (parts[0] + parts[1])) <= bound):
            return None
        words = self.check.words
        rule, g = words.rule.lower(), words.symbol
        return Finding(
            "not-linear",
            f"is not linear in its {words.direction}: {rule}({A:g}*{g}1 {B:+g}*{g}2) differs "
            f"from {A:g}*{rule}({g}1) {B:+g}*{rule}({g}2)",
            f"a {words.rule} multiplies {g} by the local derivative; it never squares, clips, "
            f"thresholds or adds to {g}",
        )

    def _zero(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        wrong = ~self.check.close(want, got)
        zeros = (got == 0) & (want != 0)
        if not wrong.any() or (wrong & ~zeros).any():
            return None
        if not got.any():
            if self._holds(arg, lambda probe, right: np.zeros_like(right)) is False:
                return None  # zero only at these inputs (x == 0 in `g * x`)
            words = self.check.words
            return Finding(
                "zero",
                f"is zero everywhere: the {words.flow} is not propagated {words.flow_to} this "
                "argument",
                f"propagate the {words.flow}: do not detach, drop or overwrite it with zeros",
            )
        region = self._region(arg, wrong, _zero_where)
        return Finding(
            "zero",
            f"is zero where {region}, where the right VJP is not (and is right elsewhere)",
            f"propagate the gradient where {region} too",
            region=region,
        )

    def _identity(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        g = self.check.passed_through(arg, got.shape)
        if g.shape != got.shape or not self.check.same(g, got):
            return None
        if (
            self._holds(arg, lambda probe, right: self.recovery.passed(probe, arg, right.shape))
            is False
        ):
            return None  # the identity only at these inputs (x == 1 in `g * x`)
        words = self.check.words
        return Finding(
            "identity",
            f"returns its {words.direction} {words.symbol} unchanged, as if the op were the "
            "identity",
            f"multiply {words.symbol} by the op's local derivative",
        )

    def _scaled(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        want64, got64 = want.astype(np.float64), got.astype(np.float64)
        norm = float(np.vdot(want64, want64))
        if norm == 0 or not np.isfinite(norm):
            return None
        factor = float(np.vdot(want64, got64)) / norm
        if (
            not np.isfinite(factor)
            or abs(factor) < 1e-12
            or math.isclose(factor, 1.0, rel_tol=1e-6)
        ):
            return None
        if not self.check.same(factor * want64, got64):
            return None
        # A factor fitting one element by accident fails on fresh inputs (none: say so).
        if (holds := self._holds(arg, lambda probe, right: factor * right)) is False:
            return None
        where = "" if holds else " on this node's own inputs (not probed on others)"
        if math.isclose(factor, -1.0, rel_tol=1e-6):
            return Finding(
                "sign-flip",
                f"has the wrong sign: it is minus the right VJP{where}",
                "negate it",
                factor=-1.0,
            )
        nice = nice_factor(factor)
        says = f"is {nice:g} times the right VJP{where}"
        return Finding("scaled", says, f"remove the factor {nice:g}", factor=nice)

    def _transposed(self, arg: int, want: np.ndarray, got: np.ndarray) -> Finding | None:
        if want.ndim < 2:
            return None
        for i, j in itertools.combinations(range(want.ndim), 2):
            if want.shape[i] == want.shape[j] and self.check.same(np.swapaxes(want, i, j), got):
                return Finding(
                    "transposed",
                    f"is the right VJP with axes {i} and {j} swapped",
                    f"swap axes {i} and {j} back (for a batched matmul: only the last two)",
                    axes=[i, j],
                )
        if want.ndim > 2 and self.check.same(np.transpose(want), got):
            return Finding(
                "transposed",
                "is the right VJP with every axis reversed (a transpose without perm)",
                "swap only the two axes you mean: np.swapaxes(t, -1, -2)",
                axes=list(reversed(range(want.ndim))),
            )
        return None

    def _formula(self, want: np.ndarray, got: np.ndarray, arg: int | None = None) -> Finding:
        return formula_finding(self.recovery if arg is not None else None, arg, want, got)


def _arg_names(check: NodeCheck) -> list[str]:
    return [f"a{i}" for i in range(len(check.node.args))]


def _nan_where(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    return ~np.isfinite(got) & np.isfinite(want)


def _zero_where(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    return (got == 0) & (want != 0)
