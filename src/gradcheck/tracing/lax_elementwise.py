"""JAX's elementwise primitives, selects, casts and reductions as registry ops
(`jax_primitives`)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .lax_table import LAX, Eqn, axes, constant_scalar, fit, lax, number
from .program import call
from .tables import Emit, V, need

# -- elementwise -------------------------------------------------------------------------

_UNARY = {name: name for name in (
    "neg", "exp", "log", "sqrt", "rsqrt", "abs", "sign", "sin", "cos", "tan", "tanh",
    "log1p", "expm1", "erf", "square", "floor", "ceil",
)} | {"logistic": "sigmoid"}  # fmt: skip


def _unary(op: str):
    def entry(e: Emit, q: Eqn) -> str:
        # exp, log, tanh, ... take an `accuracy`: None is the default implementation
        need(q.params.get("accuracy") is None, f"{q.name} at a chosen accuracy")
        return call(op, q.x.text)

    return entry


for _name, _op in _UNARY.items():
    LAX[_name] = _unary(_op)


@lax("round")
def _round(e: Emit, q: Eqn) -> str:
    # the registry's round is TensorFlow's, half to even; lax.round's default is away from 0
    need("EVEN" in str(q.params["rounding_method"]), "a round of halves away from zero")
    return call("round", q.x.text)


_OPERATORS = {"add": "+", "add_any": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}


@lax(*_OPERATORS)
def _binary(e: Emit, q: Eqn) -> str:
    a, b = q.args
    return f"{a.text} {_OPERATORS[q.name]} {b.text}"


LAX["max"] = lambda e, q: _extremum(q, "maximum", -np.inf)
LAX["min"] = lambda e, q: _extremum(q, "minimum", np.inf)


def _extremum(q: Eqn, op: str, identity: float) -> str:
    a, b = q.args
    for this, other in ((a, b), (b, a)):
        # max(-inf, x) is x (a stable logsumexp's shift): no op, and no infinite literal
        if this.const and this.value.size == 1 and float(this.value.reshape(())) == identity:
            return fit(other, q.out[0])
    return call(op, a.text, b.text)


@lax("integer_pow")
def _integer_pow(e: Emit, q: Eqn) -> str:
    y = int(q.params["y"])
    return f"{q.x.text} ** {y if y >= 0 else f'({y})'}"


@lax("exp2")
def _exp2(e: Emit, q: Eqn) -> str:
    return f"2.0 ** {q.x.text}"


@lax("erfc")
def _erfc(e: Emit, q: Eqn) -> str:
    return f"1.0 - {e.bind(call('erf', q.x.text), 'erf')}"


@lax("clamp")
def _clamp(e: Emit, q: Eqn) -> str:
    lo, x, hi = q.args
    need(x.shape == tuple(q.out[0]), "a clamp that broadcasts")
    return call("clip", x.text, lo=constant_scalar(lo), hi=constant_scalar(hi))


# -- identities and casts ------------------------------------------------------------------

LAX["copy"] = lambda e, q: q.x.text


@lax("reduce_precision")
def _reduce_precision(e: Emit, q: Eqn) -> str:
    info = np.finfo(q.x.dtype)
    keeps = q.params["exponent_bits"] >= info.nexp and q.params["mantissa_bits"] >= info.nmant
    need(keeps, "a rounding to a lower precision")
    return q.x.text


@lax("convert_element_type")
def _convert(e: Emit, q: Eqn) -> str:
    # Only a live value is written, so this is a float to a float. Every value of the case
    # is in its dtype: a cast between dtypes at least as precise is no change there (JAX
    # computes a bfloat16 exp in float32 and rounds back, as the engine's exp does); one
    # to a less precise dtype rounds, which no op says.
    new, case = q.params["new_dtype"], q.dtype
    precise = all(jnp.finfo(d).nmant >= jnp.finfo(case).nmant for d in (new, q.x.dtype))
    need(precise, f"a cast from {q.x.dtype} to {np.dtype(new)} in a {case} function")
    return q.x.text


@lax("select_n")
def _select(e: Emit, q: Eqn) -> str:
    which, *cases = q.args
    need(which.const, "a select whose predicate is computed from the inputs")
    chosen = np.asarray(which.value).astype(np.int64)
    picked = np.unique(chosen)
    if picked.size == 1:  # every element from one case (a guard that never fires)
        return fit(cases[int(picked[0])], q.out[0])
    need(len(cases) == 2, "a select among more than two cases")
    mask = e.constant(chosen.astype(np.float64), "mask", False)
    return call("where", f"{mask} != 0.0", _case(cases[1]), _case(cases[0]))


def _case(v: V) -> str:
    if v.const and v.value.size and np.all(v.value == v.value.reshape(-1)[0]):
        return number(float(v.value.reshape(-1)[0]))  # a broadcast fill: one literal
    return v.text


# -- reductions ----------------------------------------------------------------------------

_REDUCTIONS = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min",
               "reduce_prod": "prod"}  # fmt: skip


@lax(*_REDUCTIONS)
def _reduce(e: Emit, q: Eqn) -> str:
    x = q.x
    axis = axes(q.params["axes"], x.ndim)
    if axis == []:
        return x.text
    return call(_REDUCTIONS[q.name], x.text, **({} if axis is None else {"axis": axis}))


@lax("cumsum", "cumprod")
def _cumulative(e: Emit, q: Eqn) -> str:
    reverse = {"reverse": True} if q.params["reverse"] else {}
    return call(q.name, q.x.text, axis=int(q.params["axis"]), **reverse)
