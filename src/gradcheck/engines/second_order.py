"""Second order: the gradient of ``sum(grad * v)`` with respect to the inputs, where
``grad`` is the gradient of ``sum(output * cotangent)``: a Hessian-vector product.

The engine must build its gradient as nodes of its own graph and differentiate that
again; an adapter says it can with ``higher_order = True`` (others are unsupported for
``order: 2`` cases), and is then asked, by its form (SPEC §4's extension, in docs/engines.md):

* tape: ``grad(output, wrt, cotangent, create_graph=True)`` returns the gradients as
  nodes (as ``torch.autograd.grad(..., create_graph=True)`` does); gradcheck builds
  ``sum(mul(g_1, constant(v_1))) + ...`` from the engine's own ops and asks for
  ``grad(that, wrt, 1)``;
* functional: ``vjp(fn, primals, cotangent, create_graph=True)`` returns gradients that
  the engine can differentiate (no conversion to NumPy); gradcheck hands ``vjp`` the
  function ``xs -> sum(vjp(fn, xs, cotangent, create_graph=True)[i] * v_i)`` (nested
  ``jax.vjp``).

`v` is each input's seeded direction (`cases.inputs.directions`); only the inputs in
`wrt` are differentiated.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..expression import Expression
from .driver import (
    EngineFailure,
    EngineRun,
    Unsupported,
    as_array,
    as_given,
    build_call,
    build_expression,
    call_engine,
    check_grads,
    missing_ops,
    record_returned,
    scalar_loss,
)
from .forward import input_names
from .functional import function_of
from .protocol import is_functional

FIRST = "grad(create_graph=True)"  # what the engine was doing when it failed: the diagnosis
SECOND = "grad of sum(grad * v)"  # reads `EngineFailure.what`


def run_hvp(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    wrt: Sequence[str],
    cotangent: np.ndarray,
    directions: Mapping[str, np.ndarray],
) -> EngineRun:
    """The forward value, and for each input in `wrt` its part of the gradient of
    ``sum(grad * v)`` (`EngineRun.grads`)."""
    method = getattr(engine, "vjp" if is_functional(engine) else "grad", None)
    if not getattr(engine, "higher_order", False):
        raise Unsupported(
            "engine does not declare higher_order = True (its grad cannot build engine nodes "
            "with create_graph=True), so second order (order: 2) cannot run"
        )
    if not _takes_create_graph(method):  # a subclass that overrides grad and inherits the flag
        raise Unsupported(
            f"engine declares higher_order = True but its {method.__name__}() takes no "
            "create_graph argument, so second order (order: 2) cannot run"
        )
    scalar_only = bool(getattr(engine, "scalar_only", False))
    missing = missing_ops(engine, expression, scalar_only=True) + [
        op for op in ("add",) if not callable(getattr(engine, op, None))
    ]
    if missing:
        raise Unsupported(f"engine has no method for {', '.join(dict.fromkeys(missing))}")
    names = input_names(expression, wrt)
    dtype = cotangent.dtype
    seed = np.ones((), dtype) if scalar_only else cotangent
    weights = [directions[name] for name in names]
    if is_functional(engine):
        return _functional(engine, expression, inputs, names, cotangent, weights, scalar_only)
    built = build_expression(engine, expression, inputs, set(names), dtype)
    output = built[expression.output]
    raw = call_engine("value", engine.value, output)
    target = scalar_loss(engine, output, cotangent) if scalar_only else output
    nodes = [built[expression.inputs[name]] for name in names]
    # NotImplementedError here means "cannot": unsupported, as a missing method would be.
    grads = build_call(FIRST, engine.grad, target, nodes, seed.copy(), create_graph=True)
    if not isinstance(grads, (list, tuple)) or len(grads) != len(names):
        raise_count(grads, names)
    loss = weighted_sum(engine, list(grads), weights)
    result = call_engine(SECOND, engine.grad, loss, nodes, np.ones((), dtype))
    run = EngineRun(as_array(raw, "value(output)"), check_grads(result, names, SECOND))
    return record_returned(run, [raw, *result])


def _functional(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    names: list[str],
    cotangent: np.ndarray,
    weights: list[np.ndarray],
    scalar_only: bool,
) -> EngineRun:
    dtype = cotangent.dtype
    built = build_expression(engine, expression, inputs, set(), dtype)
    value = getattr(engine, "value", None) or np.asarray
    raw = call_engine("value", value, built[expression.output])
    fn = function_of(engine, expression, inputs, names, dtype, cotangent if scalar_only else None)
    seed = np.ones((), dtype) if scalar_only else cotangent

    def gradient_dot_v(*xs: Any) -> Any:
        grads = engine.vjp(fn, list(xs), seed.copy(), create_graph=True)
        if not isinstance(grads, (list, tuple)) or len(grads) != len(names):
            raise_count(grads, names)
        return weighted_sum(engine, list(grads), weights)

    gradient_dot_v.__name__ = "gradcheck_gradient_dot_v"
    primals = [np.array(inputs[name]) for name in names]
    result = call_engine(SECOND, engine.vjp, gradient_dot_v, primals, np.ones((), dtype))
    run = EngineRun(as_array(raw, "value(output)"), check_grads(result, names, SECOND))
    return record_returned(run, [raw, *result])


def _takes_create_graph(method: Any) -> bool:
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return True  # a builtin or extension method: it will speak for itself
    return any(p.name == "create_graph" or p.kind is p.VAR_KEYWORD for p in parameters)


def weighted_sum(engine: Any, grads: list[Any], weights: list[np.ndarray]) -> Any:
    """``sum(g_1 * v_1) + sum(g_2 * v_2) + ...`` from the engine's own ops."""
    make_constant = getattr(engine, "constant", None) or as_given
    total = None
    for i, (g, v) in enumerate(zip(grads, weights, strict=True)):
        weight = build_call("constant", make_constant, v.copy())
        term = build_call(f"mul(grad[{i}], v)", engine.mul, g, weight)
        term = build_call(f"sum(grad[{i}] * v)", engine.sum, term, axis=None, keepdims=False)
        total = term if total is None else build_call("add", engine.add, total, term)
    return total


def raise_count(grads: Any, names: Sequence[str]) -> None:
    count = len(grads) if isinstance(grads, (list, tuple)) else type(grads).__name__
    raise EngineFailure(
        f"{FIRST} returned {count} where a list of {len(names)} gradients was expected, "
        f"one per input ({', '.join(names)})",
        what=FIRST,
    )
