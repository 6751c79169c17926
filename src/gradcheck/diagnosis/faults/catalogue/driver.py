"""Faults of the backward driver, and of forward mode (JVP rules, the tangent's broadcast)."""

from __future__ import annotations

from ....ops import all_ops
from ..rules import Fault, vjp_as_jvp
from .broadcasting import BROADCASTING

# fmt: off
FAULTS: tuple[Fault, ...] = (
    Fault(
        "backprop.no-accumulate",
        "the backward pass overwrites a gradient where a value fans out to several "
        "consumers, instead of adding the contributions",
        "accumulate: `grad[x] = grad[x] + contribution` for every consumer of x (`+=`, not `=`)",
        driver="no-accumulate",
        seen="karpathy/nn-zero-to-hero#52",
    ),
    Fault(
        "backprop.traversal-order",
        "the backward pass visits nodes in queue (breadth-first) order, so a node can pass "
        "its gradient on before all of its consumers have contributed to it",
        "visit nodes in reverse topological order (each after all its consumers): "
        "`for node in reversed(topological_order(output))`",
        driver="traversal-order",
        seen="the question gradcheck grew from (cases/seed.yaml, examples/seed_engine.py)",
    ),
    Fault(
        "backprop.no-upstream",
        "the VJPs receive ones instead of the upstream gradient: the chain rule is not applied",
        "pass each node's own gradient to its VJP: `vjp(node, grads[node])`, not `ones_like`",
        driver="no-upstream",
    ),
    Fault(
        "jvp.vjp-rule",
        "the JVP is the VJP's rule applied to the tangent (g replaced by t): the Jacobian's "
        "transpose where forward mode needs the Jacobian itself, right only where it is "
        "symmetric (elementwise ops, softmax)",
        "apply the Jacobian, not its transpose: matmul's JVPs are `t @ b` and `a @ t` (not "
        "`t @ b.T`), transpose's is `np.transpose(t, perm)` (not the inverse permutation), "
        "a reduction's reduces `t`",
        check="jvp",
        seen="pytorch/pytorch#198017",
        jvps={
            (op.name, i): vjp_as_jvp(vjp)
            for op in all_ops()
            if op.origin is None
            for i, vjp in enumerate(op.vjps)
        },
    ),
    Fault(
        "jvp.no-broadcast",
        "the JVP of a broadcasting op leaves an argument's tangent in the argument's shape "
        "instead of broadcasting it to the output's",
        "broadcast each argument's tangent to the output's shape: "
        "`np.broadcast_to(t, y.shape)` (for a + b, the tangent of a is t broadcast)",
        check="jvp",
        unbroadcast_tangent=BROADCASTING,
        seen="pytorch/pytorch#191787",
    ),
)
# fmt: on
