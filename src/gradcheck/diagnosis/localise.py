"""Localisation: check every op node of a failing case alone.

Each node becomes a one-op expression whose inputs are the values its arguments take
in the case (the builtin engine's forward, the twin of TensorFlow's) and whose
cotangent is random. The engine's VJPs are compared with the builtin engine's, which
the test suite holds to TensorFlow and to finite differences op by op (with finite
differences themselves for a user-defined op declared without NumPy VJPs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cases.model import Case
from ..comparison.compare import close_mask, compare
from ..comparison.trust import judged_part
from ..engines.builtin import BuiltinEngine
from ..engines.driver import EngineFailure, Unsupported, build_expression, run_engine
from ..engines.numeric import numeric_run
from ..engines.protocol import EngineFactory
from ..expression import Expression, Node
from ..results import NodeResult


@dataclass
class NodeCheck:
    node: Node
    result: NodeResult
    forward_failed: bool = False
    # For each failing argument: where the engine's VJP differs (a mask over the argument).
    mismatches: dict[int, np.ndarray] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)


def single_op(node: Node) -> tuple[Expression, list[str]]:
    """`node`'s op applied to fresh inputs named a0, a1, ... (literals stay literals)."""
    inputs: dict[str, Node] = {}
    args: list[Node] = []
    for i, arg in enumerate(node.args):
        if arg.is_literal:
            args.append(Node(len(args), arg.text, (), literal=arg.literal))
            continue
        name = f"a{i}"
        leaf = Node(len(args), name, arg.shape, name=name)
        inputs[name] = leaf
        args.append(leaf)
    op_node = Node(len(args), node.text, node.shape, node.op, tuple(args), dict(node.attrs))
    return Expression(node.text, [*args, op_node], op_node, inputs, {}), list(inputs)


def node_values(case: Case) -> dict[Node, np.ndarray]:
    """Every node's forward value in the case."""
    engine = BuiltinEngine()
    built = build_expression(engine, case.expression, case.inputs, set(), case.cotangent.dtype)
    return {node: engine.value(tensor) for node, tensor in built.items()}


def check_nodes(case: Case, engine_factory: EngineFactory) -> list[NodeCheck]:
    values = node_values(case)
    rng = np.random.default_rng([case.seed, 0x10CA1])
    return [
        _check_node(case, node, values, engine_factory, rng) for node in case.expression.op_nodes
    ]


def _check_node(
    case: Case,
    node: Node,
    values: dict[Node, np.ndarray],
    engine_factory: EngineFactory,
    rng: np.random.Generator,
) -> NodeCheck:
    assert node.op is not None
    expression, names = single_op(node)
    inputs = {f"a{i}": values[arg] for i, arg in enumerate(node.args) if not arg.is_literal}
    dtype = case.cotangent.dtype
    cotangent = rng.standard_normal(node.shape).astype(dtype)
    check = NodeCheck(node, NodeResult(node.text, node.op.name, "passed"), inputs=inputs)
    if not names:
        return check
    try:
        got = run_engine(engine_factory(), expression, inputs, names, cotangent)
    except Unsupported:
        check.result.status = "skipped"
        return check
    except EngineFailure:
        check.result.status = "error"
        return check
    if node.op.vjps:
        want = run_engine(BuiltinEngine(), expression, inputs, names, cotangent)
    else:  # a user op without NumPy VJPs: finite differences judge it
        numeric = numeric_run(expression, inputs, names, cotangent, case.tolerance, case.seed)
        want = judged_part(numeric, got)
    check.forward_failed = not compare(want.forward, got.forward, case.tolerance).passed
    for name in names:
        if name not in got.grads:
            continue
        comparison = compare(want.grads[name], got.grads[name], case.tolerance)
        if not comparison.passed:
            arg = int(name[1:])
            check.result.args.append(arg)
            if comparison.reference_shape == comparison.engine_shape:
                mask = ~close_mask(want.grads[name], got.grads[name], case.tolerance)
                check.mismatches[arg] = mask
    if check.forward_failed or check.result.args:
        check.result.status = "failed"
    return check
