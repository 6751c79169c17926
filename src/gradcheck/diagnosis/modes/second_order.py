"""Diagnosis at second order: why an engine's gradient of ``sum(grad * v)`` is wrong.

Localisation differentiates each op's VJP alone, as ``torch.autograd.gradgradcheck``
does: the node becomes ``sum(op(a0, a1, ...) * g)`` with its cotangent ``g`` an input
too, and its second order (`engines.second_order`) is compared with the builtin
engine's, whose graph-building VJPs the test suite holds to TensorFlow's nested tapes
and to finite differences. Its VJP for argument i depends on every argument and on g;
with the direction v on argument i alone, the gradient with respect to each of them
says what the engine's VJP for i does with it (`HvpCheck.column`). The ``* g`` is the
engine's own `mul`: it is checked first (`mul(a0, a1)`, differentiated with respect to
its arguments), and where it cannot be trusted g stays a constant cotangent.

`not-differentiable-backward`: the engine's VJP for argument i gives the right values,
and finite differences of those values move with an argument (or with g) as they
should, but the engine differentiates them to exactly zero, or cannot differentiate
them at all: the rule computes with values taken out of the engine's graph (NumPy
arrays, ``.data``, ``.detach()``, a forward value kept as a plain array). Otherwise the
same probes as a VJP's apply (shape, NaN region, zero, scaled, transposed, formula).
Where the engine raised, a catalogue fault under which the builtin engine raises in the
same call is a likely cause, at a node that raises alone too: a differentiable VJP
raises when a step it relies on is wrong (a reduction's broadcast_to, summed back by a
faulty unbroadcast), which is not `not-differentiable-backward`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from ...cases.dtypes import machine_epsilon
from ...cases.model import Case
from ...engines.builtin.engine import BuiltinEngine
from ...engines.driver import EngineFailure, EngineRun, Unsupported
from ...engines.protocol import EngineFactory
from ...engines.reverse import run_engine
from ...engines.second_order import SECOND, run_hvp
from ...expression import Expression, Node
from ...ops import get_op
from ...results import Hint, NodeResult
from ..evidence import ModeEvidence
from ..faults.fingerprints import used_ops
from ..faults.planted import Fault, FaultyEngine, fault_hint, relevant_faults
from ..localisation.localise import (
    Words,
    checked_nodes,
    engine_run,
    node_values,
    op_label,
    single_op,
)
from ..mechanisms.findings import Finding, op_vjp_hint
from ..mechanisms.patterns import Subject, value_hints
from ..mechanisms.probes import Prober
from ..run.ranking import dedupe, rank
from .forward import JvpCheck, mode_fingerprints, raising_faults

COTANGENT = "g"  # the node's cotangent, an input of `HvpCheck.expression`
FD_STEP = 1e-4  # relative, for the finite differences of the engine's own VJP


class HvpCheck(JvpCheck):
    """One op's VJP differentiated alone: `cotangent` holds the directions v (a0, ..., g),
    `outer` the value of the node's cotangent g; the run's `grads` are the gradient of
    ``sum(grad * v)`` for each argument and for g."""

    check: ClassVar[str] = "hvp"
    words: ClassVar[Words] = Words(
        "VJP, differentiated again,", "direction", "v", "the argument's", "direction",
        "gradient", "to",
    )  # fmt: skip
    outer: np.ndarray | None = None
    with_cotangent = True  # g an input (else a constant cotangent: the engine's mul is wrong)

    @cached_property
    def expression(self) -> tuple[Expression, list[str]]:
        """``sum(op(a0, ...) * g)``, and the names it is differentiated by."""
        alone, names = single_op(self.node)
        if not self.with_cotangent:
            return alone, names
        g = Node(len(alone.nodes), COTANGENT, self.node.shape, name=COTANGENT)
        product = Node(g.index + 1, f"{self.node.text} * g", self.node.shape, get_op("mul"),
                       (alone.output, g))  # fmt: skip
        total = Node(g.index + 2, f"sum({product.text})", (), get_op("sum"), (product,),
                     {"axis": None, "keepdims": False})  # fmt: skip
        inputs = {**alone.inputs, COTANGENT: g}
        nodes = [*alone.nodes, g, product, total]
        return Expression(total.text, nodes, total, inputs, {}), [*names, COTANGENT]

    def run(self, factory: Any, cotangent: Any, inputs=None, **unused: Any) -> EngineRun:
        expression, names = self.expression
        assert self.outer is not None
        values = dict(inputs or self.inputs)
        if not self.with_cotangent:
            return run_hvp(factory(), expression, values, names, self.outer, cotangent)
        values[COTANGENT] = self.outer
        one = np.ones((), self.outer.dtype)
        return run_hvp(factory(), expression, values, names, one, cotangent)

    def right(self, cotangent: Any, inputs=None) -> EngineRun:
        return self.run(self.reference_factory, cotangent, inputs)

    def exact(self, cotangent: Any, inputs=None) -> None:
        return None

    def alone(self, arg: int) -> dict[str, np.ndarray]:
        """The directions with v on argument `arg` alone."""
        return {n: (v if n == f"a{arg}" else np.zeros_like(v)) for n, v in self.cotangent.items()}

    def column(self, arg: int) -> tuple[EngineRun, EngineRun]:
        """The engine's and the right answer with v on argument `arg` alone: what the
        engine's VJP for `arg` does with each argument and with g."""
        return self.run(self.engine_factory, self.alone(arg)), self.right(self.alone(arg))

    def first_order(self, factory: Any, inputs: Mapping[str, np.ndarray]) -> EngineRun:
        """The node's plain VJPs on `inputs`, cotangent g: what gives the values."""
        expression, names = single_op(self.node)
        assert self.outer is not None
        return run_engine(factory(), expression, dict(inputs), names, self.outer)


def check_hvp_nodes(case: Case, engine_factory: EngineFactory) -> list[HvpCheck]:
    """Every op node's VJP differentiated alone (random g and v)."""
    values = node_values(case)
    rng = np.random.default_rng([case.seed, 0x2D2])
    sound = _mul_is_sound(case, engine_factory, rng)
    checks = []
    for node in checked_nodes(case.expression):  # an output of split: a node of its own
        inputs = {f"a{i}": values[a] for i, a in enumerate(node.args) if not a.is_literal}
        if inputs:
            checks.append(_node_check(case, engine_factory, rng, node, inputs, sound))
    return checks


def _node_check(
    case: Case,
    engine_factory: EngineFactory,
    rng: np.random.Generator,
    node: Node,
    inputs: dict[str, np.ndarray],
    with_cotangent: bool,
) -> HvpCheck:
    assert node.op is not None
    dtype = case.cotangent.dtype
    variables = {**inputs, COTANGENT: np.empty(node.shape)} if with_cotangent else inputs
    check = HvpCheck(
        node, NodeResult(node.text, op_label(node), "passed", check="hvp"), inputs, list(inputs),
        JvpCheck.draw(rng, node, variables, dtype), case.tolerance, engine_factory,
        BuiltinEngine, seed=case.seed,
    )  # fmt: skip
    check.with_cotangent = with_cotangent
    check.outer = rng.standard_normal(node.shape).astype(dtype)
    _check(check)
    return check


def _mul_is_sound(case: Case, engine_factory: EngineFactory, rng: np.random.Generator) -> bool:
    """Whether the engine's `mul` differentiates at second order, as `* g` must."""
    a, b = Node(0, "a0", (2, 3), name="a0"), Node(1, "a1", (2, 3), name="a1")
    node = Node(2, "a0 * a1", (2, 3), get_op("mul"), (a, b))
    inputs = {n: rng.standard_normal((2, 3)).astype(case.cotangent.dtype) for n in ("a0", "a1")}
    check = _node_check(case, engine_factory, rng, node, inputs, with_cotangent=False)
    return check.result.status == "passed"


def _check(check: HvpCheck) -> None:
    try:
        check.want = check.right(check.cotangent)
    except Unsupported:
        check.result.status = "skipped"  # a user op without NumPy VJPs: nothing to judge by
        return
    if not engine_run(check):
        if check.result.status == "error":
            check.result.args = list(range(len(check.node.args)))
        return
    if all(check.same(w, check.got.grads[n]) for n, w in check.want.grads.items()):
        return
    check.result.status = "failed"
    for i in (int(n[1:]) for n in check.inputs):
        got, want = check.column(i)
        if not all(check.same(w, got.grads[n]) for n, w in want.grads.items()):
            check.result.args.append(i)


class SecondOrderProber(Prober):
    """The probes of a node whose VJP is wrong at second order (`HvpCheck`)."""

    check: HvpCheck

    def probes(self):
        return (self._shape, self._nan_region, self._zero, self._scaled, self._transposed)

    def explain(self, arg: int) -> Finding:
        detached = self.detached(arg)
        if detached is not None:
            return detached
        got, want = self.check.column(arg)
        name = f"a{arg}"
        for probe in self.probes():
            finding = probe(arg, want.grads[name], got.grads[name])
            if finding is not None:
                return finding
        return self._formula(want.grads[name], got.grads[name])

    def detached(self, arg: int, raised: str | None = None) -> Finding | None:
        """`not-differentiable-backward`, if the probes show it for the VJP of `arg`: its
        values are right and move with some variable as they should (finite differences
        of the engine's own VJP), but the engine's derivative is zero (or `raised`)."""
        check = self.check
        first = check.first_order(check.engine_factory, check.inputs)
        right = check.first_order(check.reference_factory, check.inputs)
        name = f"a{arg}"
        if not check.same(right.grads[name], first.grads[name]):
            return None  # the VJP is wrong already at first order
        lost = list(check.cotangent)  # when it raised, every variable
        if raised is None:
            got, want = check.column(arg)
            lost = [
                v for v, w in want.grads.items()
                if not got.grads[v].any() and not check.same(w, got.grads[v])
            ]  # fmt: skip
        moving = [v for v in lost if self._moves(arg, v)]
        if not moving:
            return None
        variables = " and ".join(_variable(check.node, v) for v in moving)
        how = f"differentiating it raised: {raised}" if raised else "its derivative is 0"
        return Finding(
            "not-differentiable-backward",
            f"leaves the engine's graph: its values are right and move with {variables} "
            f"(finite differences of the engine's own VJP), but {how}: it does not depend "
            f"on {variables} as the engine sees it",
            "compute the VJP with the engine's own ops on its nodes (with create_graph), never "
            "on arrays taken out of the graph (NumPy values, `.data`, `.detach()`, a forward "
            "value kept as a plain array)",
        )

    def _moves(self, arg: int, variable: str) -> bool:
        """Finite differences of the engine's own VJP for `arg`, moving `variable` along its
        direction: do they give the right second derivative (and is it not zero)?"""
        check = self.check
        v = check.cotangent
        want = check.right(check.alone(arg))
        expected = float(np.vdot(want.grads[variable], v[variable]))
        dtype = check.outer.dtype
        eps = machine_epsilon(dtype)
        h = FD_STEP * max(1.0, float(np.sqrt(np.mean(np.square(v[variable])))))
        values = []
        for step in (h, -h):
            inputs, outer = dict(check.inputs), check.outer
            if variable == COTANGENT:
                check.outer = (outer + step * v[COTANGENT]).astype(dtype)
            else:
                inputs[variable] = (inputs[variable] + step * v[variable]).astype(dtype)
            try:
                vjp = check.first_order(check.engine_factory, inputs).grads[f"a{arg}"]
            except (EngineFailure, Unsupported):
                return False
            finally:
                check.outer = outer
            values.append(float(np.vdot(vjp, v[f"a{arg}"])))
        fd = (values[0] - values[1]) / (2 * h)
        scale = max(abs(expected), abs(fd), 1e-300)
        return abs(expected) > 100 * eps * scale and abs(fd - expected) <= 1e-2 * scale


def _variable(node: Node, name: str) -> str:
    if name == COTANGENT:
        return "its cotangent g"
    return node.args[int(name[1:])].text


def diagnose_hvp(evidence: ModeEvidence) -> list[Hint]:
    """Hints for a failing (or raising) second order: per input patterns, per node the
    VJP that is wrong at second order and how."""
    case, reference, result, got = evidence.case, evidence.reference, evidence.result, evidence.got
    assert reference.hvp is not None
    spell = evidence.spelling
    hints: list[Hint] = []
    for item in result.hvp:
        if got is not None and not item.comparison.passed:
            subject = Subject(
                item.name, reference.hvp.grads[item.name], got.grads[item.name],
                case.tolerance, case.dtype, {}, frozenset(),
                label=f"{item.name}'s gradient of sum(grad * v)",
            )  # fmt: skip
            item.hints = sorted(value_hints(subject), key=rank)
    # A VJP fault may show at second order alone (an unbroadcast), or make it raise. The
    # VJPs are differentiated too, and they broadcast (a reduction's spreads g with
    # broadcast_to): the shared unbroadcast's faults are candidates whatever the ops.
    candidates = relevant_faults(used_ops(case) | {"broadcast_to"}, driver=False)
    failure = evidence.failure
    raising = raising_faults(case, candidates, "hvp", failure) if failure is not None else []
    checks = check_hvp_nodes(case, evidence.engine_factory)
    result.nodes += [c.result for c in checks]
    for check in checks:
        prober = SecondOrderProber(check)
        for arg in check.result.args:
            if check.result.status == "failed":
                finding = prober.explain(arg)
            else:
                finding = _raised(prober, arg, raising)
            if finding is not None:
                hints.append(op_vjp_hint(check, arg, finding, spell))
    if got is not None:
        faults = mode_fingerprints(case, got, candidates, "hvp", spell)
        for item in result.hvp:
            if not item.comparison.passed:
                item.hints[:0] = faults
        hints = faults + hints
    hints += [_raising_hint(f, case, spell) for f in raising]
    if not hints and evidence.failure is not None:
        hints.append(_driver_hint(evidence.failure))
    hints += [h for item in result.hvp for h in item.hints[:1]]
    return dedupe(sorted(hints, key=rank))


def _raised(prober: SecondOrderProber, arg: int, raising: list[Fault]) -> Finding | None:
    """A node whose second order raises: as a catalogue fault that raises on the case
    makes it raise too (an op's backward inside the VJP is wrong, not the VJP), else not
    differentiable, where the probes show it."""
    check = prober.check
    assert check.failure is not None
    if check.failure.what != SECOND:
        return Finding("formula", f"raises at second order: {check.failure.message}",
                       "make the VJP accept and return engine nodes", "likely")  # fmt: skip
    for fault in raising:
        try:
            check.run(lambda f=fault: FaultyEngine(f), check.alone(arg))
        except EngineFailure as failure:
            if failure.what != SECOND:
                continue
            return Finding(
                fault.code,
                f"raises at second order, as the builtin engine with the catalogue's "
                f"{fault.name} does: {fault.summary}",
                fault.fix,
                "likely",
            )
    return prober.detached(arg, raised=check.failure.message) or Finding(
        "not-differentiable-backward",
        f"cannot be differentiated again ({check.failure.message})",
        "compute the VJP with the engine's own ops on its nodes (with create_graph)",
        "likely",
    )


def _raising_hint(fault: Fault, case: Case, spell: str) -> Hint:
    says = "the builtin engine with this one fault raises on this case too, at second order"
    hint = fault_hint(fault, case, spell, f"{fault.summary}; {says}, as the engine does")
    hint.confidence = "likely"
    return hint


def _driver_hint(failure: EngineFailure) -> Hint:
    return Hint(
        "not-differentiable-backward",
        f"the engine cannot differentiate its own gradient ({failure.message}), though every "
        "op's VJP can be, alone: the backward pass itself leaves the graph (gradients "
        "accumulated in place or as arrays, an unbroadcast done in NumPy)",
        "build the backward pass from the engine's ops on its nodes: accumulate with `add`, "
        "sum broadcast gradients back with the engine's `sum`/`reshape`",
        "likely",
        mechanism="not-differentiable-backward",
    )
