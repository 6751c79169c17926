"""Reverse mode: an expression built in an engine and differentiated with respect to
`wrt` (`grad`, or a functional engine's `vjp`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..expression import Expression
from .driver import (
    EngineFailure,
    EngineRun,
    Unsupported,
    as_array,
    build_expression,
    call_engine,
    check_grads,
    differentiable_inputs,
    missing_ops,
    record_returned,
    scalar_loss,
)
from .functional import run_functional
from .protocol import is_functional


def run_engine(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    wrt: Sequence[str],
    cotangent: np.ndarray,
    *,
    ask_twice: bool = False,
) -> EngineRun:
    """Build `expression` in `engine` and differentiate it with respect to `wrt`."""
    scalar_only = bool(getattr(engine, "scalar_only", False))
    missing = missing_ops(engine, expression, scalar_only)
    if missing:
        raise Unsupported(f"engine has no method for {', '.join(missing)}", missing)
    if is_functional(engine):
        return run_functional(engine, expression, inputs, wrt, cotangent, ask_twice=ask_twice)
    dtype = cotangent.dtype
    built = build_expression(
        engine, expression, inputs, differentiable_inputs(expression, wrt), dtype
    )
    output = built[expression.output]
    raw = call_engine("value", engine.value, output)
    run = EngineRun(as_array(raw, "value(output)"), {})
    returned = [raw]
    target, seed = output, cotangent
    if scalar_only:  # SPEC §4: the engine differentiates sum(output * cotangent) itself
        target, seed = scalar_loss(engine, output, cotangent), np.ones((), dtype)

    def ask(names: Sequence[str]) -> dict[str, np.ndarray]:
        nodes = [built[expression.lookup(n)] for n in names]
        result = call_engine("grad", engine.grad, target, nodes, seed.copy())
        grads = check_grads(result, names)
        returned.extend(result)
        return grads

    try:
        run.grads = ask(wrt)
    except EngineFailure as failure:
        # SPEC §4: an engine may refuse gradients with respect to intermediate nodes.
        leaves = [n for n in wrt if n in expression.inputs]
        if not leaves or len(leaves) == len(wrt):
            raise
        run.grads = ask(leaves)
        wrt = leaves
        run.notes.append(
            f"engine cannot differentiate with respect to intermediate nodes: {failure.message}"
        )
    if ask_twice:
        run.grads_again = ask(wrt)
    return record_returned(run, returned)
