"""What a JAX custom rule's right rule is, and its opaque op's parameter names: where a
custom rule's primal is one registry op (``jnp.tanh(x)``), `single_op` names it, so that
the fix states that op's rule in the user's names; `param_names` reads the names JAX kept
for the rule's arguments."""

from __future__ import annotations

import ast
from typing import Any

from .jax_trace import Step, Trace, Val
from .lax_table import LAX, Eqn
from .tables import Emit, Unmapped, V

_OPERATORS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
              ast.MatMult: "matmul", ast.Pow: "pow"}  # fmt: skip


def single_op(step: Step) -> str | None:
    """The registry op a custom rule's primal is, when it is one op applied to the rule's
    float arguments in order, with no attribute (``jnp.tanh(x)``, ``a * b``): its rule is
    then the right one, and its texts say it. None otherwise."""
    from ..ops import has_op

    closed = step.eqn.params["call_jaxpr"]
    if len(step.outputs) != 1 or not all(v.floating and not v.literal for v in step.inputs):
        return None
    inner = Trace()
    probes = [Val(v.shape, v.dtype, True) for v in step.inputs]
    outs = inner.walk(closed.jaxpr, closed.consts, probes, None)
    written = [s for s in inner.steps if s.live]
    if len(written) != 1 or written[0].outputs != outs or written[0].inputs != probes:
        return None
    made = written[0]
    entry = LAX.get(made.name)
    if entry is None:
        return None
    args = [V(v.shape, False, lambda: None, lambda i=i: f"a{i}", v.dtype)
            for i, v in enumerate(made.inputs)]  # fmt: skip
    try:
        text = entry(Emit(_refuse, _refuse), Eqn(made.name, args, dict(made.eqn.params),
                                                 [v.shape for v in made.outputs]))  # fmt: skip
        tree = ast.parse(text if isinstance(text, str) else "", mode="eval").body
    except (Unmapped, SyntaxError):
        return None
    if isinstance(tree, ast.BinOp) and type(tree.op) in _OPERATORS:
        name, operands = _OPERATORS[type(tree.op)], [tree.left, tree.right]
    elif isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and not tree.keywords:
        name, operands = tree.func.id, tree.args
    else:
        return None
    order = [a.id if isinstance(a, ast.Name) else None for a in operands]
    if order != [f"a{k}" for k in range(len(probes))] or not has_op(name):
        return None
    return name


def _refuse(*args: Any) -> str:
    raise Unmapped("more than one op")


def param_names(step: Step, slots: list[int]) -> list[str] | None:
    """A custom rule's argument names where JAX kept them, one plain name per argument (its
    primal's, else its fwd's: a custom_vjp's primal keeps none); None where it did not."""
    if not step.custom:
        return None
    for key in ("call_jaxpr", "fwd_jaxpr_thunk"):
        rule = step.eqn.params.get(key)
        info = getattr(getattr(rule, "jaxpr", rule), "debug_info", None)
        names = list(getattr(info, "arg_names", None) or ())
        if len(names) == len(step.inputs):
            picked = [names[i] for i in slots]
            if all(n.isidentifier() for n in picked) and len(set(picked)) == len(picked):
                return picked
    return None
