"""Every node's gradient between the inputs and the output: the engine's and the right one.

SPEC §4 lets `wrt` hold intermediate nodes, so the engine is asked for all of them at
once (a node without a name gets one the expression language cannot write, `@3`); for
a functional engine gradcheck cuts the graph at each node itself. The builtin engine
(with the engine's declared conventions) gives the right ones, and its tensors compute
what each use of a node passes on to it. The driver's diagnosis (`driver.py`) reads
them; asked twice, they also say where stale gradients start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ...comparison.compare import compare
from ...engines.builtin.engine import BuiltinEngine, Tensor
from ...engines.driver import (
    EngineFailure,
    Unsupported,
    build_expression,
    call_engine,
    differentiable_inputs,
)
from ...engines.reverse import run_engine
from ...expression import Expression, Node
from ..evidence import Evidence
from ..mechanisms.dtypes import within_rounding

Use = tuple[Node, int]  # a consumer, and the position of the argument it reads


@dataclass
class Adjoints:
    """Every node's gradient between the inputs and the output, the engine's (asked once,
    and again when `again`) and the right one, output first; and the builtin engine's
    tensors, to compute what each use passes on."""

    order: list[Node]
    uses: dict[Node, list[Use]]
    engine: dict[Node, np.ndarray]
    right: dict[Node, np.ndarray]
    again: dict[Node, np.ndarray] | None
    builtin: BuiltinEngine
    tensors: dict[Node, Tensor]
    same: Callable[[np.ndarray, np.ndarray], bool]
    shares: dict[Use, np.ndarray] = field(default_factory=dict)

    def share(self, use: Use, gradient: np.ndarray) -> np.ndarray:
        """What `use` passes on to its argument given the consumer's `gradient`."""
        consumer, position = use
        assert consumer.op is not None
        tensor = self.tensors[consumer]
        g = np.asarray(gradient, tensor.value.dtype)
        share = self.builtin.vjp(tensor, position, g)
        return self.builtin.reduce_to_shape(consumer.op, share, tensor.args[position].value.shape)

    def label(self, node: Node, *, named: bool = True) -> str:
        """`node` as a message names it: its text, numbered where another node has the same
        text, after its binding's name (`h = exp(x)`) when `named`."""
        twins = [n for n in reversed(self.order) if n.text == node.text]
        text = node.text if len(twins) < 2 else f"{node.text} (#{twins.index(node) + 1})"
        return f"{node.name} = {text}" if named and node.name and node.name != node.text else text

    def right_share(self, use: Use) -> np.ndarray:
        """What `use` should have passed on: its share of the consumer's right gradient."""
        if use not in self.shares:
            self.shares[use] = self.share(use, self.right[use[0]])
        return self.shares[use]

    def first_wrong(self, got: dict[Node, np.ndarray], want: dict[Node, np.ndarray]) -> Node | None:
        return next((n for n in self.order if not self.same(want[n], got[n])), None)


def adjoints(evidence: Evidence, *, again: bool = False) -> Adjoints | str:
    """Both engines' gradients at every node, or why the engine's cannot be had."""
    case = evidence.case
    expression = case.expression
    if any(node.is_multi for node in expression.nodes):
        # No gradient with respect to such an op itself, only to its parts (SPEC §3.1),
        # and the stories read each consumer's share of one gradient.
        return "the expression has an op with several outputs, whose uses the stories do not read"
    leaves = differentiable_inputs(expression, case.wrt)
    order = _between(expression, leaves)
    names: dict[Node, str] = {}
    bindings = dict(expression.bindings)
    for node in order:
        if node.is_input or (node.name and bindings.get(node.name) is node):
            names[node] = node.name or ""
        else:  # a node without a name gets one the expression cannot hold
            names[node] = f"@{node.index}"
            bindings[names[node]] = node
    probe = replace(expression, bindings=bindings)
    wrt = [names[n] for n in order]
    try:
        engine = call_engine("creating the engine", evidence.engine_factory)
        run = run_engine(engine, probe, case.inputs, wrt, case.cotangent, ask_twice=again)
    except (EngineFailure, Unsupported) as e:
        return f"asked for them, it raised: {getattr(e, 'message', e)}"
    if any(name not in run.grads for name in wrt):
        return "; ".join(run.notes) or "it returned none"
    builtin = evidence.builtin()
    try:
        tensors = build_expression(
            builtin, probe, case.inputs, differentiable_inputs(probe, wrt), case.cotangent.dtype
        )
    except Unsupported as e:  # a user op declared without NumPy VJPs
        return f"the builtin engine cannot give the right ones: {e}"
    right = builtin.grad(tensors[expression.output], [tensors[n] for n in order], case.cotangent)
    found = Adjoints(
        order,
        {n: [(c, i) for c in order for i, a in enumerate(c.args) if a is n] for n in order},
        {n: run.grads[names[n]] for n in order},
        dict(zip(order, right, strict=True)),
        {n: run.grads_again[names[n]] for n in order} if run.grads_again else None,
        builtin,
        tensors,
        _judge(evidence),
    )
    return _consistent(found, evidence) or found


def _between(expression: Expression, leaves: set[str]) -> list[Node]:
    """The nodes on a path from a leaf to the output, output first (reverse topological)."""
    depends: dict[Node, bool] = {}
    for node in expression.nodes:  # arguments first
        depends[node] = (node.is_input and node.name in leaves) or any(
            depends[a] for a in node.args
        )
    needed = {expression.output}
    for node in reversed(expression.nodes):
        if node in needed:
            needed.update(node.args)
    return [n for n in reversed(expression.nodes) if n in needed and depends[n]]


def _judge(evidence: Evidence) -> Callable[[np.ndarray, np.ndarray], bool]:
    tolerance, rounding = evidence.case.tolerance, evidence.rounding

    def same(want: np.ndarray, got: np.ndarray) -> bool:
        if np.shape(want) != np.shape(got):
            return False
        return compare(want, got, tolerance).passed or within_rounding(want, got, rounding)[0]

    return same


def _consistent(found: Adjoints, evidence: Evidence) -> str | None:
    """Why the engine's intermediate gradients cannot be read as its driver's, if they cannot:
    its gradient of the output itself must be the cotangent, and its gradients of the inputs
    what it gave in the case."""
    output = evidence.case.expression.output
    if not found.same(found.right[output], found.engine[output]):
        return "its gradient with respect to the output itself is not the cotangent"
    assert evidence.engine is not None
    for name, grad in evidence.engine.grads.items():
        node = evidence.case.expression.lookup(name)
        if node in found.engine and not found.same(grad, found.engine[node]):
            return f"asked for them too, it gave another gradient for {name}"
    return None
