"""Localisation: check every op node of a failing case alone.

Each node becomes a one-op expression whose inputs are the values its arguments take
in the case (the builtin engine's forward, the twin of TensorFlow's) and whose
cotangent is random. The engine's VJPs are compared with the builtin engine's (with
the engine's declared conventions), which the test suite holds to TensorFlow and to
finite differences op by op (with finite differences themselves for a user-defined op
declared without NumPy VJPs). A `NodeCheck` keeps what it ran, so the mechanism probes
can run the same node again on other cotangents and inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...cases.dtypes import LOW_PRECISION, widened
from ...cases.model import Case, Tolerance
from ...comparison.compare import close_mask, compare
from ...comparison.trust import judged_part
from ...engines.builtin.engine import BuiltinEngine, Tensor
from ...engines.driver import EngineFailure, EngineRun, Unsupported, build_expression
from ...engines.protocol import EngineFactory
from ...engines.reverse import run_engine
from ...expression import Expression, Node
from ...ops import unbroadcast
from ...ops.broadcast import sums_back
from ...references.numeric import numeric_run
from ...results import NodeResult
from ..mechanisms.dtypes import within_rounding

# A fresh instance of the builtin engine that stands for the right answer.
ReferenceFactory = Callable[[], BuiltinEngine]


def single_op(node: Node, *, literals_as_inputs: bool = False) -> tuple[Expression, list[str]]:
    """`node`'s op applied to fresh inputs named a0, a1, ... (literals stay literals,
    unless `literals_as_inputs`: then they are inputs too, holding the literal's value)."""
    inputs: dict[str, Node] = {}
    args: list[Node] = []
    for i, arg in enumerate(node.args):
        if arg.is_literal and not literals_as_inputs:
            args.append(Node(len(args), arg.text, (), literal=arg.literal))
            continue
        name = f"a{i}"
        leaf = Node(len(args), name, arg.shape, name=name, integer=arg.integer)
        inputs[name] = leaf
        args.append(leaf)
    names = [name for name, leaf in inputs.items() if not leaf.integer]  # indices: no gradient
    if node.outputs is not None and node.part is not None:  # one output of an op with several
        made = Node(len(args), node.text, (), node.op, tuple(args), dict(node.attrs))
        made.outputs = node.outputs
        part = Node(len(args) + 1, node.text, node.shape, args=(made,), part=node.part)
        return Expression(node.text, [*args, made, part], part, inputs, {}), names
    op_node = Node(len(args), node.text, node.shape, node.op, tuple(args), dict(node.attrs))
    return Expression(node.text, [*args, op_node], op_node, inputs, {}), names


@dataclass(frozen=True)
class Words:
    """How the probes' findings name what a node check runs (SPEC §6.1's words are the VJP's)."""

    rule: str  # "VJP": the rule checked
    direction: str  # "cotangent": what the rule is run on
    symbol: str  # "g": its name in the rules
    result: str  # "the argument's": whose shape the rule's answer has
    upstream: str  # "upstream gradient": what the chain rule multiplies in
    flow: str  # "gradient": what the rule passes on ...
    flow_to: str  # ... "to" the argument (a JVP: "from" it)


@dataclass
class NodeCheck:
    """One op node run alone: by the engine and by the builtin engine, on one cotangent.

    `cotangent` is the direction the rule is run on; the methods under "directions" are
    what the mechanism probes know of it, so that a subclass can check another rule on
    the same probes (`diagnosis.modes.forward`: JVPs, on tangents).
    """

    check: ClassVar[str] = "vjp"  # NodeResult.check and the hint code: op-vjp
    words: ClassVar[Words] = Words(
        "VJP", "cotangent", "g", "the argument's", "upstream gradient", "gradient", "to"
    )
    stream: ClassVar[int] = 0x10CA1  # of the random directions `check_nodes` draws

    node: Node
    result: NodeResult
    inputs: dict[str, np.ndarray]
    names: list[str]
    cotangent: np.ndarray
    tolerance: Tolerance
    engine_factory: EngineFactory
    reference_factory: ReferenceFactory
    low_precision: bool = False
    seed: int = 0  # the case's: finite differences' random directions
    rounding: str | None = None  # differences within its rounding are no failure
    output: np.ndarray | None = None  # the node's value in the case (the builtin engine's)
    want: EngineRun | None = None
    got: EngineRun | None = None
    failure: EngineFailure | None = None  # what the engine raised on this node alone
    forward_failed: bool = False
    # For each failing argument: where the engine's VJP differs (a mask over the argument).
    mismatches: dict[int, np.ndarray] = field(default_factory=dict)

    def run(
        self,
        factory: Callable[[], object],
        cotangent: np.ndarray,
        inputs: Mapping[str, np.ndarray] | None = None,
        *,
        literals_as_inputs: bool = False,
        wrt: list[str] | None = None,
    ) -> EngineRun:
        """The node alone through `factory`'s engine (raises what `run_engine` raises):
        on other `inputs` of the same names if given, for `wrt` (default: every input)."""
        expression, names = single_op(self.node, literals_as_inputs=literals_as_inputs)
        values = dict(inputs or self.inputs)
        for i, arg in enumerate(self.node.args):
            if arg.is_literal and literals_as_inputs:
                values[f"a{i}"] = np.asarray(arg.literal, self.cotangent.dtype)
        return run_engine(factory(), expression, values, wrt or names, cotangent)

    def right(
        self, cotangent: np.ndarray, inputs: Mapping[str, np.ndarray] | None = None
    ) -> EngineRun:
        """The right VJPs of the node (on other `inputs` if given): the builtin engine's,
        on the node's own inputs from its value in the case without computing that value
        again; finite differences for a user op declared without NumPy VJPs."""
        op = self.node.op
        if not op.vjps:
            expression, _ = single_op(self.node)
            values = dict(inputs or self.inputs)
            return numeric_run(expression, values, self.names, cotangent, self.tolerance, self.seed)
        if inputs is not None or self.output is None or self.node.part is not None:
            return self.run(self.reference_factory, cotangent, inputs)
        args = [
            Tensor(np.asarray(arg.literal, self.output.dtype))
            if f"a{i}" not in self.inputs
            else Tensor(self.inputs[f"a{i}"])  # an integer input: a constant
            if arg.integer
            else Tensor(self.inputs[f"a{i}"], requires_grad=True, name=f"a{i}")
            for i, arg in enumerate(self.node.args)
        ]
        out = Tensor(self.output, op, args, dict(self.node.attrs), requires_grad=True)
        grads = self.reference_factory().backward(out, np.asarray(cotangent, self.output.dtype))
        return EngineRun(
            self.output, {t.name: grads.get(t, np.zeros_like(t.value)) for t in args if t.name}
        )

    def exact(
        self, cotangent: np.ndarray, inputs: Mapping[str, np.ndarray] | None = None
    ) -> EngineRun | None:
        """Low precision: the builtin engine's float64 answer for the same rounded values."""
        if not self.low_precision:
            return None
        upcast = {n: widened(v) for n, v in (inputs or self.inputs).items()}
        return self.right(np.asarray(cotangent, np.float64), upcast)

    def same(self, want: np.ndarray, got: np.ndarray, exact: np.ndarray | None = None) -> bool:
        if compare(want, got, self.tolerance, exact).passed:
            return True
        return self.rounding is not None and within_rounding(want, got, self.rounding)[0]

    def close(self, want: np.ndarray, got: np.ndarray, exact: np.ndarray | None = None):
        """Elementwise: where `got` matches `want` (arrays of one shape)."""
        return close_mask(want, got, self.tolerance, exact)

    # -- directions: what the rule is run on ---------------------------------------------
    @classmethod
    def draw(
        cls, rng: np.random.Generator, node: Node, inputs: Mapping[str, np.ndarray], dtype: Any
    ) -> Any:
        """The first direction of a check of `node` (whose arguments take `inputs`)."""
        return rng.standard_normal(node.shape).astype(dtype)

    def random_direction(self, rng: np.random.Generator) -> Any:
        """Another direction like `cotangent`, drawn from `rng`."""
        return rng.standard_normal(self.cotangent.shape).astype(self.cotangent.dtype)

    def combine(self, a: float, first: Any, b: float, second: Any) -> Any:
        """``a * first + b * second``, in the direction's dtype."""
        return (a * first + b * second).astype(self.cotangent.dtype)

    def unit_direction(self, output_shape: tuple[int, ...], inputs: Mapping[str, Any]) -> Any:
        """A direction of ones, for the node on `inputs` with output shape `output_shape`."""
        return np.ones(output_shape, self.cotangent.dtype)

    def passed_through(self, arg: int, shape: tuple[int, ...]) -> np.ndarray:
        """What the rule gives for `arg` if it hands its direction on unchanged."""
        g = self.cotangent
        return unbroadcast(g, shape) if sums_back(g.shape, shape) else g

    @property
    def numeric_right(self) -> bool:
        """The right answer comes from finite differences (an op without NumPy rules)."""
        return not self.node.op.vjps


def node_values(case: Case) -> dict[Node, np.ndarray]:
    """Every node's forward value in the case (an op with several outputs has none: each
    of its parts has its own)."""
    engine = BuiltinEngine()
    built = build_expression(engine, case.expression, case.inputs, set(), case.cotangent.dtype)
    return {node: engine.value(tensor) for node, tensor in built.items() if not node.is_multi}


def checked_nodes(expression: Expression) -> list[Node]:
    """The nodes localisation checks alone: each op node, and for an op with several
    outputs each output the expression uses (`Node.output_view`), in the graph's order."""
    out = []
    for node in expression.op_nodes:
        if not node.is_multi:
            out.append(node)
            continue
        parts = [n for n in expression.nodes if n.is_part and n.args[0] is node]
        out += [node.output_view(part) for part in sorted(parts, key=lambda p: p.part or 0)]
    return out


def op_label(node: Node) -> str:
    """What the results call a checked node's op: split[1] for an output of split."""
    assert node.op is not None
    return node.op.name if node.part is None else f"{node.op.name}[{node.part}]"


def check_nodes(
    case: Case,
    engine_factory: EngineFactory,
    reference_factory: ReferenceFactory = BuiltinEngine,
    rounding: str | None = None,
    only: Callable[[Node], bool] | None = None,
    kind: type[NodeCheck] = NodeCheck,
    *,
    run: bool = True,
) -> list[NodeCheck]:
    """Every op node checked alone (those `only` accepts, if given); `rounding`: a dtype
    (the engine's, when it computes in a lower precision than the case) whose rounding
    differences do not fail a node; `kind`: what is checked (a `NodeCheck` subclass checks
    another rule than the VJP). Not `run`: the checks as they would run, each with its
    inputs (its arguments' values in the case) and direction (drawn for every node in
    turn, so the same whatever `only` leaves out).
    """
    values = node_values(case)
    rng = np.random.default_rng([case.seed, kind.stream])
    checks = []
    for node in checked_nodes(case.expression):
        assert node.op is not None
        inputs = {f"a{i}": values[arg] for i, arg in enumerate(node.args) if not arg.is_literal}
        # Drawn for every node, so that `only` leaves the others' directions as they were.
        direction = kind.draw(rng, node, inputs, case.cotangent.dtype)
        if only is not None and not only(node):
            continue
        check = kind(
            node,
            NodeResult(node.text, op_label(node), "passed", check=kind.check),
            inputs,
            single_op(node)[1],
            direction,
            case.tolerance,
            engine_factory,
            reference_factory,
            low_precision=case.dtype in LOW_PRECISION and not case.tolerance_given,
            seed=case.seed,
            rounding=rounding,
            output=values[_valued(case.expression, node)],
        )
        if run:
            check_node(check)
        checks.append(check)
    return checks


def engine_run(check: NodeCheck) -> bool:
    """The engine on the node alone, into `check.got`; False (the status says why) when it
    cannot run it or raised."""
    try:
        check.got = check.run(check.engine_factory, check.cotangent)
    except Unsupported:
        check.result.status = "skipped"
        return False
    except EngineFailure as failure:
        check.result.status = "error"
        check.failure = failure
        return False
    return True


def check_node(check: NodeCheck) -> None:
    """Run `check`: the engine, then the right answer, and where they differ."""
    if not check.names or not engine_run(check):
        return
    try:
        check.want = check.right(check.cotangent)
    except Unsupported:  # the builtin engine has no rule to judge this one by
        check.result.status = "skipped"
        return
    if check.numeric_right:  # finite differences: only what they can judge
        check.want = judged_part(check.want, check.got)
    exact = check.exact(check.cotangent)
    check.forward_failed = not check.same(
        check.want.forward, check.got.forward, exact.forward if exact else None
    )
    for name in check.names:
        if name not in check.got.grads:
            continue
        want, got = check.want.grads[name], check.got.grads[name]
        pinned = exact.grads[name] if exact else None
        if not check.same(want, got, pinned):
            arg = int(name[1:])
            check.result.args.append(arg)
            if want.shape == got.shape:
                check.mismatches[arg] = ~check.close(want, got, pinned)
    if check.forward_failed or check.result.args:
        check.result.status = "failed"


def _valued(expression: Expression, node: Node) -> Node:
    """The graph node holding a checked node's value: itself, or an output view's part."""
    if node.part is None:
        return node
    return next(n for n in expression.nodes if n.is_part and n.text == node.text)
