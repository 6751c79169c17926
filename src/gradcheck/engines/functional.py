"""Functional engines (SPEC §4): JAX, HIPS autograd, anything built on ``vjp(f, *primals)``.

Such an adapter has ``vjp(self, fn, primals, cotangent)`` instead of `leaf`, `constant`
and `grad`. gradcheck builds `fn` from the adapter's own op methods: a pure function of
the `wrt` values that computes the case's expression, with the other inputs and the
literals as constants (through the adapter's `constant` if it has one, else as NumPy
arrays). The forward value comes from calling the op methods on the inputs directly.

Gradients with respect to intermediate nodes are gradcheck's business: for each such
`wrt` binding a second function takes that node's value (the engine's own forward value
there) as its argument, everything upstream of it held fixed, and `vjp` differentiates
that, so the adapter never sees anything but functions of arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..expression import Expression, Node
from .driver import (
    EngineRun,
    as_array,
    build_expression,
    call_engine,
    check_grads,
    record_returned,
    scalar_loss,
)


def run_functional(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    wrt: Sequence[str],
    cotangent: np.ndarray,
    *,
    ask_twice: bool = False,
) -> EngineRun:
    dtype = cotangent.dtype
    built = build_expression(engine, expression, inputs, set(), dtype)
    value = getattr(engine, "value", None) or np.asarray
    raw = call_engine("value", value, built[expression.output])
    forward, returned = as_array(raw, "value(output)"), [raw]
    scalar_only = bool(getattr(engine, "scalar_only", False))
    seed = np.ones((), dtype) if scalar_only else cotangent

    leaves = [n for n in wrt if n in expression.inputs]
    # One call for the inputs together; one per intermediate node, cut out of the graph there.
    groups = [(leaves, [np.array(inputs[n]) for n in leaves])] if leaves else []
    for name in wrt:
        if name not in expression.inputs:
            node = expression.lookup(name)
            primal = as_array(call_engine("value", value, built[node]), f"value({node.text})")
            groups.append(([name], [primal]))
    weights = cotangent if scalar_only else None
    # Made once, so that an engine that compiles `fn` (jax.jit) compiles it once per case.
    functions = [
        function_of(engine, expression, inputs, names, dtype, weights) for names, _ in groups
    ]

    def ask() -> dict[str, np.ndarray]:
        grads: dict[str, np.ndarray] = {}
        for (names, primals), fn in zip(groups, functions, strict=True):
            copies = [p.copy() for p in primals]  # the engine may write into what it is given
            result = call_engine("vjp", engine.vjp, fn, copies, seed.copy())
            grads.update(check_grads(result, names, "vjp"))
            returned.extend(result)
        return {name: grads[name] for name in wrt}

    run = EngineRun(forward, ask())
    if ask_twice:
        run.grads_again = ask()
    return record_returned(run, returned)


def function_of(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    names: Sequence[str],
    dtype: np.dtype,
    cotangent: np.ndarray | None,
) -> Callable[..., Any]:
    """The case's expression as a function of the nodes `names` (its output, or with a
    `cotangent`, the scalar ``sum(output * cotangent)``) for the engine to differentiate."""
    nodes: list[Node] = [expression.lookup(n) for n in names]

    def fn(*values: Any) -> Any:
        given = dict(zip(nodes, values, strict=True))
        built = build_expression(engine, expression, inputs, set(), dtype, given)
        output = built[expression.output]
        return output if cotangent is None else scalar_loss(engine, output, cotangent)

    fn.__name__ = "gradcheck_expression"
    fn.__doc__ = f"{expression.source.strip()} as a function of {', '.join(names)}"
    return fn
