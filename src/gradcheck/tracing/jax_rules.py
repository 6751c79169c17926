"""How opaque JAX nodes run, and what a custom rule's right rule is.

An opaque step runs three ways: in the engine, as the equation itself (``bind``: a
``custom_vjp`` then runs the user's fwd and bwd under ``jax.vjp``, the rule under test);
for the numeric reference, as its forward in float64 (`forward`: a custom rule's primal,
every float widened so that a float32 function is differentiated in float64); and its
right VJP is JAX's autodiff of that forward (`right_vjp`), no custom rule involved. Where
a custom rule's primal is one registry op (``jnp.tanh(x)``), `single_op` names it, so the
fix states its rule; `rule_line` is where the user wrote the rule (the bwd, the jvp).
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np

from .jax_trace import Step, Trace, Val, apply, bind, primal, source, where_of
from .lax_table import LAX, Emit, Eqn, Unmapped, V
from .program import Where

_OPERATORS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
              ast.MatMult: "matmul", ast.Pow: "pow"}  # fmt: skip


def runner(step: Step, slots: list[int]) -> Callable[..., list[Any]]:
    """The step's equation with its argument slots filled (the literals it had kept): its
    float outputs, as a list."""
    fixed = [v.value for v in step.inputs]
    floats = [k for k, v in enumerate(step.outputs) if v.live]

    def run(*arrays: Any) -> list[Any]:
        args = list(fixed)
        for i, a in zip(slots, arrays, strict=True):
            args[i] = a
        outs = bind(step.eqn, args)
        return [outs[k] for k in floats]

    return run


def forward(step: Step, slots: list[int]) -> Callable[..., list[Any]]:
    """The step's forward in float64, as JAX arrays: a custom rule's primal (no custom rule
    anywhere inside), every float constant, literal and dtype parameter widened."""
    fixed = [v.value for v in step.inputs]
    floats = [k for k, v in enumerate(step.outputs) if v.live]

    def run(*arrays: Any) -> list[Any]:
        args = [_widen(a) for a in fixed]
        for i, a in zip(slots, arrays, strict=True):
            args[i] = _widen(a)
        outs = _evaluate_eqn(step.eqn, args)
        return [outs[k] for k in floats]

    return run


def _evaluate_eqn(eqn: Any, args: list[Any]) -> list[Any]:
    inner = primal(eqn)
    if inner is not None:
        return _evaluate(*inner, args)
    if any(jex.jaxprs_in_params(eqn.params)):
        # control flow (cond, scan, while) is typed at the traced dtypes: run it there
        avals = [v.aval for v in eqn.invars]
        outs = bind(eqn, [jnp.asarray(a, aval.dtype) for a, aval in zip(args, avals, strict=True)])
        return [_widen(o) for o in outs]
    return apply(eqn, args, {k: _wide_dtype(v) for k, v in eqn.params.items()})


def _evaluate(jaxpr: Any, consts: Sequence[Any], args: list[Any]) -> list[Any]:
    env: dict[Any, Any] = dict(zip(jaxpr.constvars, map(_widen, consts), strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))

    def read(atom: Any) -> Any:
        if isinstance(atom, jex.Literal):
            return _widen(np.asarray(atom.val, dtype=atom.aval.dtype))
        return env[atom]

    for eqn in jaxpr.eqns:
        outs = _evaluate_eqn(eqn, [read(a) for a in eqn.invars])
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(a) for a in jaxpr.outvars]


def _widen(value: Any) -> Any:
    dtype = getattr(value, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, np.floating) and dtype != np.float64:
        return jnp.asarray(value, np.float64)
    return value


def _wide_dtype(value: Any) -> Any:
    """A float dtype parameter (a cast's target, an accumulation type) as float64."""
    try:
        floating = isinstance(value, (np.dtype, type)) and np.issubdtype(value, np.floating)
    except TypeError:
        return value
    return np.dtype(np.float64) if floating else value


def numpy_forward(run: Callable[..., list[Any]], count: int) -> Callable[..., Any]:
    """`run` (a `forward`) as the registry's NumPy forward, compiled once per shape."""
    compiled = jax.jit(run)

    def forward_(*arrays: np.ndarray) -> Any:
        values = tuple(np.asarray(o, np.float64) for o in compiled(*arrays))
        return values if count > 1 else values[0]

    return forward_


def right_vjp(run: Callable[..., list[Any]], k: int, count: int) -> Callable[..., Any]:
    """Argument `k`'s VJP by JAX's autodiff of the float64 forward (`forward`): the numeric
    reference's gradient for a large input, confirmed there by finite differences."""

    def vjp(g: Any, ans: Any, *arrays: np.ndarray) -> np.ndarray:
        def along(x: Any) -> list[Any]:
            return run(*arrays[:k], x, *arrays[k + 1 :])

        _, pull = jax.vjp(along, jnp.asarray(arrays[k], np.float64))
        cotangents = g if count > 1 else (g,)
        (grad,) = pull([jnp.asarray(c, np.float64) for c in cotangents])
        return np.asarray(grad)

    return vjp


def single_op(step: Step) -> Any:
    """The registry op a custom rule's primal is, when it is one op applied to the rule's
    float arguments in order, with no attribute (``jnp.tanh(x)``, ``a * b``): its rule is
    then the right one, and its texts say it. None otherwise."""
    from ..ops import get_op, has_op

    closed = step.eqn.params["call_jaxpr"]
    if len(step.outputs) != 1 or not all(v.floating for v in step.inputs):
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
    args = [V(v.shape, v.dtype, False, lambda: None, lambda i=i: f"a{i}")
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
    return get_op(name)


def _refuse(*args: Any) -> str:
    raise Unmapped("more than one op")


def rule_line(step: Step) -> Where | None:
    """Where the user wrote a custom rule: a custom_vjp's bwd, a custom_jvp's jvp."""
    rule = step.eqn.params.get("bwd", step.eqn.params.get("jvp_jaxpr_fun"))
    found = source(getattr(rule, "debug_info", None))
    if found is None:
        return None
    name, file, line = found
    # JAX names a decorated function's first line, its decorator's: the def is the rule's
    while linecache.getline(file, line).lstrip().startswith("@"):
        line += 1
    return where_of(file, line, name)


def param_names(step: Step, slots: list[int]) -> list[str]:
    """The opaque op's parameters: a custom rule's argument names where JAX kept them
    (one plain name per argument), else x0, x1, ..."""
    if step.custom:
        info = step.eqn.params["call_jaxpr"].jaxpr.debug_info
        names = list(getattr(info, "arg_names", None) or ())
        if len(names) == len(step.inputs):
            picked = [names[i] for i in slots]
            if all(n.isidentifier() for n in picked) and len(set(picked)) == len(picked):
                return picked
    return [f"x{k}" for k in range(len(slots))]
