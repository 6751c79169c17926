"""Diagnosis in forward mode: why an engine's JVPs differ from the reference's.

As in reverse mode (`diagnosis/__init__.py`), in order: the value patterns of each
failing input's JVP; the two modes held to each other (`jvp-vjp-mismatch`: which of the
two is wrong, by the reference); localisation, every op node's JVP checked alone on its
own inputs with a random tangent per argument (`JvpCheck`, compared with the builtin
engine's JVPs, which the test suite holds to TensorFlow's `ForwardAccumulator` and to
finite differences), each failing node explained by the same mechanism probes as a VJP
(`mechanisms.Prober`: ignores its tangent, not linear, identity, zero, scaled, shape, ...)
and by the catalogue's forward-mode faults (`jvp.vjp-rule`, `jvp.no-broadcast`); then
those faults on the whole case.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ...cases.dtypes import widened
from ...cases.model import Case
from ...comparison.compare import compare
from ...engines.builtin.engine import BuiltinEngine
from ...engines.checks import run_check
from ...engines.driver import EngineFailure, EngineRun, Unsupported
from ...engines.forward import run_jvp
from ...expression import Node
from ...results import CaseResult, Hint, InputResult
from .. import idiom
from ..evidence import ModeEvidence
from ..faults.fingerprints import used_ops
from ..faults.planted import Fault, FaultyEngine, fault_hint, relevant_faults
from ..localisation.localise import NodeCheck, Words, check_nodes, single_op
from ..mechanisms.findings import node_forward_hint, op_vjp_hint
from ..mechanisms.patterns import Subject, value_hints
from ..mechanisms.probes import Prober
from ..run.ranking import dedupe, rank


class JvpCheck(NodeCheck):
    """One op node's JVPs alone: `cotangent` holds a tangent per argument (a0, a1, ...),
    and the run's `grads[a<i>]` is the output's tangent along argument i's alone."""

    check: ClassVar[str] = "jvp"
    words: ClassVar[Words] = Words(
        "JVP", "tangent", "t", "the output's", "tangent", "tangent", "from"
    )
    stream: ClassVar[int] = 0x7A46E

    def run(
        self,
        factory: Any,
        cotangent: Any,
        inputs: Mapping[str, np.ndarray] | None = None,
        *,
        literals_as_inputs: bool = False,
        wrt: list[str] | None = None,
    ) -> EngineRun:
        expression, names = single_op(self.node, literals_as_inputs=literals_as_inputs)
        return run_jvp(factory(), expression, dict(inputs or self.inputs), wrt or names, cotangent)

    def right(self, cotangent: Any, inputs: Mapping[str, np.ndarray] | None = None) -> EngineRun:
        try:
            return self.run(self.reference_factory, cotangent, inputs)
        except EngineFailure as e:  # a user op declared without NumPy JVPs: nothing to judge by
            if isinstance(e.__cause__, NotImplementedError):
                raise Unsupported(str(e.__cause__)) from e
            raise

    def exact(self, cotangent: Any, inputs: Mapping[str, np.ndarray] | None = None):
        if not self.low_precision:
            return None
        wide = {n: widened(v) for n, v in (inputs or self.inputs).items()}
        return self.right({n: np.asarray(t, np.float64) for n, t in cotangent.items()}, wide)

    @property
    def numeric_right(self) -> bool:
        return False

    @classmethod
    def draw(cls, rng: np.random.Generator, node: Node, inputs: Mapping[str, np.ndarray], dtype):
        return {name: rng.standard_normal(v.shape).astype(dtype) for name, v in inputs.items()}

    def random_direction(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in self.cotangent.items()}

    def combine(self, a: float, first: Any, b: float, second: Any) -> dict[str, np.ndarray]:
        return {n: (a * first[n] + b * second[n]).astype(t.dtype) for n, t in first.items()}

    def unit_direction(self, output_shape, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        dtype = next(iter(self.cotangent.values())).dtype
        return {name: np.ones(np.shape(value), dtype) for name, value in inputs.items()}

    def passed_through(self, arg: int, shape: tuple[int, ...]) -> np.ndarray:
        t = self.cotangent[f"a{arg}"]
        try:
            return np.broadcast_to(t, shape)
        except ValueError:
            return t


def diagnose_jvp(evidence: ModeEvidence) -> list[Hint]:
    """Hints for the failing JVPs of `result.jvp`; each input's own go to its `InputResult`."""
    case, result, got = evidence.case, evidence.result, evidence.got
    reference, spell = evidence.reference.jvp, evidence.spelling
    assert reference is not None
    hints: list[Hint] = []
    for item in result.jvp:
        if got is not None and not item.comparison.passed:
            item.hints = _patterns(case, reference, got, item.name)
        if item.consistency is not None and not item.consistency.passed:
            item.hints.insert(0, _inconsistent(item, result))
    checks = check_nodes(case, evidence.engine_factory, kind=JvpCheck)
    result.nodes += [c.result for c in checks]
    for check in checks:
        if check.result.status == "error" and check.failure is not None:
            hints.append(_raising(check))
        elif check.forward_failed:
            hints.append(node_forward_hint(check))
        elif check.result.status == "failed":
            prober = Prober(check)
            hints += [op_vjp_hint(check, arg, prober.find(arg), spell) for arg in check.result.args]
    if got is not None:
        failing = {c.node.op.name for c in checks if c.result.status == "failed"}
        candidates = relevant_faults(failing or used_ops(case), driver=False, check="jvp")
        faults = mode_fingerprints(case, got, candidates, "jvp", spell)
        for item in result.jvp:
            if not item.comparison.passed:
                item.hints[:0] = faults
        hints = faults + hints
        if not hints and all(c.result.status == "passed" for c in checks):
            hints.append(_driver_hint())
    hints += [h for item in result.jvp for h in item.hints[:1]]
    # The two modes' disagreement is proven, but where the bug is says more: after the nodes.
    return dedupe(sorted(hints, key=lambda h: (h.code == "jvp-vjp-mismatch", rank(h))))


def _patterns(case: Case, reference: EngineRun, got: EngineRun, name: str) -> list[Hint]:
    others = {n: g for n, g in reference.grads.items() if n != name}
    subject = Subject(
        name,
        reference.grads[name],
        got.grads[name],
        case.tolerance,
        case.dtype,
        others,
        frozenset(),
        label=f"the JVP along {name}'s tangent",
    )
    return sorted(value_hints(subject), key=rank)


def _inconsistent(item: InputResult, result: CaseResult) -> Hint:
    """Forward and reverse mode disagree for one input; the reference says which is wrong."""
    assert item.consistency is not None
    rev = next((i for i in result.inputs if i.name == item.name), None)
    wrong = [
        mode
        for mode, comparison in (("reverse mode (the gradient)", rev and rev.comparison),
                                 ("forward mode (the JVP)", item.comparison))
        if comparison is not None and not comparison.passed
    ]  # fmt: skip
    if len(wrong) == 1:
        verdict = f"the reference says {wrong[0]} is the wrong one"
    elif wrong:
        verdict = "both differ from the reference"
    else:
        verdict = "the reference cannot tell which (it does not judge every element)"
    c = item.consistency
    return Hint(
        "jvp-vjp-mismatch",
        f"{item.name}: the engine's two modes disagree: <vjp(u), t> = {c.vjp_dot:.6g} but "
        f"<u, jvp(t)> = {c.jvp_dot:.6g} (u the cotangent, t {item.name}'s tangent; they "
        f"may differ by {c.bound:.2g}); {verdict}",
        "the JVP of each op must apply the Jacobian whose transpose its VJP applies: "
        "fix the mode the reference rejects, op by op (the nodes checked alone say which)",
        "exact",
    )


def _raising(check: NodeCheck) -> Hint:
    node, op = check.node, check.node.op
    assert op is not None and check.failure is not None
    right = (
        f"; {op.name}'s JVP for {idiom.param(op, 0)} is {idiom.rule(op, 0, 'numpy', 'fwd')}"
        if op.rule(0, mode="fwd")
        else ""  # a user op declared without JVP texts: no rule to state, never `None`
    )
    return Hint(
        "op-jvp",
        f"{node.text}: {op.name}'s JVP raises when checked alone: {check.failure.message}",
        f"make {op.name}'s JVP accept a tangent of each argument's shape and return one of "
        f"the output's{right}",
        "exact",
        op=op.name,
        node=node.text,
    )


def mode_fingerprints(
    case: Case, got: EngineRun, faults: list[Fault], check: str, spell: str
) -> list[Hint]:
    """The `faults` that reproduce the engine's `check` run (``jvp``: its JVPs; ``hvp``: its
    second order) in the builtin engine and change something on the case."""
    right = _answers(BuiltinEngine(), case, check)
    found = []
    for fault in faults:
        faulty = _answers(FaultyEngine(fault), case, check)
        if faulty is None or right is None:
            continue
        if _same(faulty, got.grads, case) and not _same(faulty, right, case):
            found.append(fault_hint(fault, case, spell))
    return found


def raising_faults(
    case: Case, faults: list[Fault], check: str, failure: EngineFailure
) -> list[Fault]:
    """The `faults` under which the builtin engine raises in the call of the case's `check`
    run the engine's `failure` was raised in, where without them it does not raise."""
    if _raised_in(BuiltinEngine(), case, check) is not None:
        return []
    return [f for f in faults if _raised_in(FaultyEngine(f), case, check) == failure.what]


def _raised_in(engine: BuiltinEngine, case: Case, check: str) -> str | None:
    """The call `engine` raised in on `case` (EngineFailure.what), None if it did not."""
    try:
        run_check(engine, case, check)
    except EngineFailure as failure:
        return failure.what or "?"
    except Unsupported:
        return "unsupported"
    return None


def _answers(engine: BuiltinEngine, case: Case, check: str) -> dict[str, np.ndarray] | None:
    try:
        return run_check(engine, case, check).grads
    except (EngineFailure, Unsupported):
        return None


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray], case: Case) -> bool:
    return all(compare(a[n], b[n], case.tolerance).passed for n in a)


def _driver_hint() -> Hint:
    return Hint(
        "jvp-driver",
        "every op node's JVP passes when checked alone, but the whole expression's JVP "
        "fails: the forward pass's propagation of tangents is wrong, not a rule",
        "visit nodes in topological order (each after its arguments) and add the tangent "
        "shares of all of a node's arguments: `t[node] = sum(jvp_i(t[arg_i]) for each arg)`",
        "likely",
    )
