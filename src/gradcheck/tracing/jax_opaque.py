"""JAX's opaque nodes: a user's custom rule (a ``jax.custom_vjp``, a ``jax.custom_jvp``) or
a primitive no registry op says, as a `JaxCall` (what is called, its literals, which of
its outputs count) and the opaque op declared from it (`declare_call`).

A call runs two ways: through the user's code, its custom rule the rule under test (the
engine's method: ``jax.vjp`` of a ``custom_vjp`` runs its fwd and bwd); and as its primal
in float64 with no custom rule anywhere (`JaxCall.primal`: the numeric reference's
forward, and by JAX's autodiff the right rule, `right_vjp`). What it calls, its target,
is the traced equation itself (`Equation`) in a check; a saved case's ops file names it
again (`tracing.jax_saved`): the user's custom function imported (`Custom`), or a
primitive by name (`Primitive`).
"""

from __future__ import annotations

import inspect
import linecache
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.extend.core as jex
import jax.extend.core.primitives as primitives
import jax.numpy as jnp
import numpy as np

# the stock adapter switches 64-bit mode on as it is imported, before any array is made:
# a float64 input and every value computed from it stay float64
from ..engines.stock.jax import JaxEngine
from ..ops import get_op
from .jax_trace import apply, bind, called, primal_of, source, where_of
from .opaque import OpaqueOp, declare, rule_texts
from .program import Where


def _definition(file: str, line: int, name: str) -> Where:
    """Where a function is defined: its def line (a decorated one's first is a decorator)."""
    while linecache.getline(file, line).lstrip().startswith("@"):
        line += 1
    return where_of(file, line, name)


@dataclass
class Equation:
    """A traced equation: a custom rule's call or a primitive's, bound again as it was."""

    eqn: Any

    @property
    def name(self) -> str:
        return called(self.eqn) if self.kind.startswith("custom") else self.eqn.primitive.name

    @property
    def kind(self) -> str:
        """'custom_vjp', 'custom_jvp', or the primitive's name."""
        return self.eqn.primitive.name.removesuffix("_call")

    def run(self, args: list[Any]) -> list[Any]:
        # a case's integer constants are int64: the equation was typed with its own
        avals = [v.aval for v in self.eqn.invars]
        typed = [a if jax.dtypes.issubdtype(aval.dtype, np.inexact) else jnp.asarray(a, aval.dtype)
                 for a, aval in zip(args, avals, strict=True)]  # fmt: skip
        return bind(self.eqn, typed)

    def primal(self, args: list[Any]) -> list[Any]:
        return _evaluate_eqn(self.eqn, args)

    def rule_line(self) -> Where | None:
        """Where the user wrote the rule: a custom_vjp's bwd, a custom_jvp's jvp."""
        rule = self.eqn.params.get("bwd", self.eqn.params.get("jvp_jaxpr_fun"))
        found = source(getattr(rule, "debug_info", None))
        return _definition(found[1], found[2], found[0]) if found else None


@dataclass
class Custom:
    """A user's ``jax.custom_vjp`` or ``jax.custom_jvp``, called on the op's arrays."""

    fn: Any

    @property
    def name(self) -> str:
        return self.fn.__name__

    @property
    def kind(self) -> str:
        return "custom_vjp" if isinstance(self.fn, jax.custom_vjp) else "custom_jvp"

    def run(self, args: list[Any]) -> list[Any]:
        return jax.tree_util.tree_leaves(self.fn(*args))

    def primal(self, args: list[Any]) -> list[Any]:
        return jax.tree_util.tree_leaves(self.fn.fun(*args))

    def rule_line(self) -> Where | None:
        rule = inspect.unwrap(self.fn.bwd if self.kind == "custom_vjp" else self.fn.jvp)
        code = getattr(rule, "__code__", None)  # none for a partial: no line to point at
        if code is None:
            return None
        return _definition(code.co_filename, code.co_firstlineno, rule.__name__)


@dataclass
class Primitive:
    """A primitive of JAX's by name (``jax.extend.core.primitives``), with its parameters."""

    name: str
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.name

    @property
    def primitive(self) -> Any:
        return getattr(primitives, f"{self.name.replace('-', '_')}_p")

    def run(self, args: list[Any]) -> list[Any]:
        out = self.primitive.bind(*args, **self.settings)
        return list(out) if self.primitive.multiple_results else [out]

    def primal(self, args: list[Any]) -> list[Any]:
        out = self.primitive.bind(*args, **{k: _wide_dtype(v) for k, v in self.settings.items()})
        return list(out) if self.primitive.multiple_results else [out]

    def rule_line(self) -> Where | None:
        return None


@dataclass
class JaxCall:
    """What an opaque node calls: `target` on the op's arrays, in order, with `fixed` the
    literals it had at their argument positions; `picks`, its outputs that are the op's
    (the float ones); which arrays are `integer`; `params`, the op's parameter names; and
    `same`, the registry op a custom rule's primal is alone (its rule texts then say the
    right rule)."""

    target: Any
    params: list[str]
    fixed: dict[int, Any] = field(default_factory=dict)
    picks: list[int] = field(default_factory=lambda: [0])
    integer: list[int] = field(default_factory=list)
    same: str | None = None

    @property
    def custom(self) -> bool:
        return self.target.kind.startswith("custom")

    def arguments(self, arrays: Sequence[Any]) -> list[Any]:
        given = iter(arrays)
        count = len(self.fixed) + len(arrays)
        return [self.fixed[i] if i in self.fixed else next(given) for i in range(count)]

    def run(self, arrays: Sequence[Any]) -> list[Any]:
        """The call through the user's code: the op's outputs, a list."""
        outs = self.target.run(self.arguments(arrays))
        return [outs[k] for k in self.picks]

    def primal(self, arrays: Sequence[Any]) -> list[Any]:
        """The call's primal in float64, no custom rule: the op's outputs, a list."""
        outs = self.target.primal([_widen(a) for a in self.arguments(arrays)])
        return [outs[k] for k in self.picks]


def declare_call(call: JaxCall, where: Where | None, name: str) -> OpaqueOp:
    """The opaque op `call` is, registered as `name`; `where` is the line a primitive's
    node points at (a custom rule points at the rule)."""
    count = len(call.picks)
    compiled = jax.jit(call.primal)

    def forward(*arrays: np.ndarray) -> Any:
        values = tuple(np.asarray(o, np.float64) for o in compiled(arrays))
        return values if count > 1 else values[0]

    def method(engine: Any, *arrays: Any) -> Any:
        outs = call.run(arrays)
        return tuple(outs) if count > 1 else outs[0]

    params, texts = list(call.params), {}
    if call.custom:
        label = f"{call.target.name} (a jax.{call.target.kind}"
        kind, where = "function", call.target.rule_line()
        if call.same is not None:
            params, texts = rule_texts(get_op(call.same), params)
            label += f" whose primal is {call.same}"
        label += ")"
    else:
        label, kind = f"lax.{call.target.kind}", "framework"
    floats = [k for k in range(len(params)) if k not in call.integer]
    opaque = declare(
        name, params=params, forward=forward, method=method, kind=kind, label=label,
        where=where, integer=[params[k] for k in call.integer],
        outputs=count if count > 1 else None, texts=texts,
        vjps=[right_vjp(call, k, count) if k in floats else None for k in range(len(params))],
    )  # fmt: skip
    opaque.call = call
    return opaque


def right_vjp(call: JaxCall, k: int, count: int) -> Callable[..., Any]:
    """Argument `k`'s VJP by JAX's autodiff of the call's primal in float64: the numeric
    reference's gradient for a large input, confirmed there by finite differences."""

    def vjp(g: Any, ans: Any, *arrays: np.ndarray) -> np.ndarray:
        def along(x: Any) -> list[Any]:
            return call.primal([*arrays[:k], x, *arrays[k + 1 :]])

        _, pull = jax.vjp(along, jnp.asarray(arrays[k], np.float64))
        cotangents = g if count > 1 else (g,)
        (grad,) = pull([jnp.asarray(c, np.float64) for c in cotangents])
        return np.asarray(grad)

    return vjp


def engine_class(methods: dict[str, Callable[..., Any]], name: str, custom_vjps: list[str]) -> type:
    """The stock JAX adapter with the opaque ops' methods and the cut's, a class of its
    own: its compiled programs are keyed by it, never shared with another trace's."""

    def jvp(engine: Any, fn: Callable[..., Any], primals: Any, tangents: Any) -> Any:
        try:
            return JaxEngine.jvp(engine, fn, primals, tangents)
        except NotImplementedError as e:  # SPEC §12: unsupported, naming the custom_vjp
            said = str(e).splitlines()[0].partition("JAX: ")[2]
            raise NotImplementedError(
                f"{' and '.join(custom_vjps)} has no forward-mode rule (JAX: {said})"
            ) from None

    return type("TracedJaxEngine", (JaxEngine,), {
        "name": f"jax ({name}, traced)", "stop_gradient": _cut, **methods,
        **({"jvp": jvp} if custom_vjps else {}),
        "__doc__": f"{name}, replayed node by node through JAX",
    })  # fmt: skip


def _cut(engine: Any, x: Any) -> Any:
    return jax.lax.stop_gradient(x)


# -- the primal in float64 ------------------------------------------------------------------


def _evaluate_eqn(eqn: Any, args: list[Any]) -> list[Any]:
    inner = primal_of(eqn)
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
