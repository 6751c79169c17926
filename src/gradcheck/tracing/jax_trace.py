"""A JAX function's jaxpr, flattened into the steps gradcheck writes out.

``jax.make_jaxpr`` traces the function once, at the caller's shapes and dtypes; the walk
then flattens its equations. A ``jit``/``pjit`` and a ``jax.checkpoint`` are inlined, and
so is a ``custom_jvp`` of JAX's own library (``jnp.logaddexp``; defined in JAX's package):
its primal is what it computes, and JAX's rule for it is no user's to check. A few of
those library functions are kept whole where the registry has them exactly (`WHOLE`:
``jax.nn.relu``, whose rule at 0 is TensorFlow's, ``silu``, ``softplus``). A
``custom_vjp``, and a ``custom_jvp`` defined anywhere else, is a custom gradient: one step,
kept whole (an opaque node). Every other equation is one step.

A value is *live* when it is a float that depends on a differentiated input; every other
value (a mask, an index, a closed-over array) is a constant, computed from the traced
inputs only when something reads it (`Trace.value`), equation by equation as JAX would
evaluate the jaxpr.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.extend.core as jex
import jaxlib
import numpy as np

from ..api.engines import relative
from .program import Where

# Frames that are not the user's: JAX's, gradcheck's, Python's own.
SKIPPED = (
    *(os.path.dirname(m.__file__) + os.sep for m in (jax, jaxlib, sys.modules["gradcheck"])),
    sysconfig.get_paths()["stdlib"] + os.sep,
    "<frozen",
)
_JAX = os.path.dirname(jax.__file__) + os.sep
CALLS = ("jit", "pjit", "closed_call", "core_call", "checkpoint", "remat", "remat2")
CUSTOM = ("custom_vjp_call", "custom_jvp_call")
# JAX's own functions kept whole, by the name its jaxpr gives them: the primitive that
# calls them, and the registry op they are
WHOLE = {("custom_jvp_call", "relu"): "relu", ("jit", "silu"): "silu",
         ("jit", "softplus"): "softplus"}  # fmt: skip


@dataclass(eq=False)
class Val:
    """One value of the flattened trace: shape and dtype, whether it is live, the step that
    made it (None for an input, a literal, a closed-over array) and its value once known;
    `name` is an argument's name (the user's, for the case's inputs)."""

    shape: tuple[int, ...]
    dtype: Any
    live: bool
    step: Step | None = None
    value: Any = None
    known: bool = False
    literal: bool = False
    name: str = ""

    @property
    def floating(self) -> bool:
        return bool(jax.dtypes.issubdtype(self.dtype, np.floating))


@dataclass(eq=False)
class Step:
    """One equation of the flattened trace (`name`: its primitive, a library function kept
    whole, or a custom rule's call) on its input values, with the user's line."""

    name: str
    eqn: Any
    inputs: list[Val]
    outputs: list[Val]
    where: Where | None
    index: int
    custom: bool = False  # a user's custom_vjp or custom_jvp

    @property
    def live(self) -> bool:
        return any(v.live for v in self.outputs)


@dataclass
class Trace:
    """The flattened trace: its steps in the order JAX runs them, its inputs and outputs."""

    steps: list[Step] = field(default_factory=list)
    inputs: list[Val] = field(default_factory=list)
    outputs: list[Val] = field(default_factory=list)

    @classmethod
    def of(cls, closed: Any, values: list[Any], names: list[str], constants: list[str]) -> Trace:
        """The trace of `closed` (a ``ClosedJaxpr``) on `values`, its differentiated inputs
        named `names`; `constants` names its constants (a closed-over argument's name)."""
        trace = cls()
        for var, value, name in zip(closed.jaxpr.invars, values, names, strict=True):
            trace.inputs.append(_known(var.aval, value, live=True, name=name))
        trace.outputs = trace.walk(closed.jaxpr, closed.consts, trace.inputs, None, constants)
        return trace

    def walk(
        self, jaxpr: Any, consts: Any, ins: list[Val], where: Where | None,
        names: Sequence[str] = (),
    ) -> list[Val]:  # fmt: skip
        """Flatten `jaxpr`'s equations on `ins`; its outputs. `where`: the user's line that
        called it, for equations whose own frames are all JAX's (a library function's);
        `names`, its constants' names where they are the function's arguments."""
        env: dict[Any, Val] = {}
        for k, (var, value) in enumerate(zip(jaxpr.constvars, consts, strict=True)):
            env[var] = _known(var.aval, value, live=False, name=names[k] if names else "")
        env.update(zip(jaxpr.invars, ins, strict=True))
        for eqn in jaxpr.eqns:
            args = [_read(env, a) for a in eqn.invars]
            outs = self._equation(eqn, args, user_line(eqn) or where)
            env.update(zip(eqn.outvars, outs, strict=True))
        return [_read(env, a) for a in jaxpr.outvars]

    def _equation(self, eqn: Any, args: list[Val], where: Where | None) -> list[Val]:
        name = eqn.primitive.name
        if any(a.live for a in args):
            whole = WHOLE.get((name, called(eqn)))
            if whole is not None and library(eqn):
                return self._step(whole, eqn, args, where)
            inner = inlined(eqn)
            if inner is not None:
                return self.walk(*inner, args, where)
            if name in CUSTOM:
                return self._step(name, eqn, args, where, custom=True)
        return self._step(name, eqn, args, where)

    def _step(self, name: str, eqn: Any, args: list[Val], where: Where | None,
              custom: bool = False) -> list[Val]:  # fmt: skip
        live = any(a.live for a in args)
        outs = [
            Val(tuple(v.aval.shape), v.aval.dtype, live and _inexact(v.aval.dtype))
            for v in eqn.outvars
        ]
        step = Step(name, eqn, args, outs, where, len(self.steps), custom)
        for out in outs:
            out.step = step
        self.steps.append(step)
        return outs

    def value(self, val: Val) -> Any:
        """`val`'s value, evaluating the steps it needs that are not evaluated yet."""
        pending: dict[int, Step] = {}
        stack = [val.step] if not val.known and val.step is not None else []
        while stack:
            step = stack.pop()
            if step.index not in pending:
                pending[step.index] = step
                stack += [v.step for v in step.inputs if not v.known and v.step is not None]
        for index in sorted(pending):
            step = pending[index]
            outs = bind(step.eqn, [v.value for v in step.inputs])
            for out, value in zip(step.outputs, outs, strict=True):
                out.value, out.known = value, True
        return val.value


def bind(eqn: Any, args: list[Any]) -> list[Any]:
    """`eqn` applied to `args`, as ``jax.core.eval_jaxpr`` applies it: its outputs, a list."""
    return apply(eqn, args, eqn.params)


def apply(eqn: Any, args: list[Any], params: dict[str, Any]) -> list[Any]:
    """`eqn`'s primitive bound to `args` with `params` (its own, or changed); a list."""
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*args, **eqn.primitive.get_bind_params(params))
    return list(out) if eqn.primitive.multiple_results else [out]


def inlined(eqn: Any) -> tuple[Any, Any] | None:
    """The (jaxpr, consts) an equation calls, where inlining it keeps what it computes and
    how JAX differentiates it: a ``jit``, a checkpoint, a library ``custom_jvp``."""
    name = eqn.primitive.name
    if name in CALLS:
        called_ = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
    elif name == "custom_jvp_call" and library(eqn):
        called_ = eqn.params["call_jaxpr"]
    else:
        return None
    if isinstance(called_, jex.ClosedJaxpr):
        return called_.jaxpr, called_.consts
    return (called_, ()) if isinstance(called_, jex.Jaxpr) else None


def primal_of(eqn: Any) -> tuple[Any, Any] | None:
    """What an equation computes with no custom rule: a call's jaxpr, a custom rule's primal
    (what its right gradient is JAX's autodiff of)."""
    if eqn.primitive.name in CUSTOM:
        closed = eqn.params["call_jaxpr"]
        return closed.jaxpr, closed.consts
    return inlined(eqn)


def source(debug_info: Any) -> tuple[str, str, int] | None:
    """(function name, file, line) of a function JAX traced, from its debug info."""
    found = re.fullmatch(r"(.*) at (.*):(\d+)", getattr(debug_info, "func_src_info", "") or "")
    return (found[1], found[2], int(found[3])) if found else None


def _called_jaxpr(eqn: Any) -> Any:
    closed = eqn.params.get("call_jaxpr", eqn.params.get("jaxpr"))
    return getattr(closed, "jaxpr", closed)


def called(eqn: Any) -> str:
    """The name of the function a call or custom rule equation runs ('' if none)."""
    found = source(getattr(_called_jaxpr(eqn), "debug_info", None))
    return found[0] if found else ""


def library(eqn: Any) -> bool:
    """Whether the function an equation calls is defined in JAX's own package."""
    found = source(getattr(_called_jaxpr(eqn), "debug_info", None))
    return found is not None and os.path.abspath(found[1]).startswith(_JAX)


def where_of(file: str, line: int, function: str) -> Where:
    return Where(relative(file), line, linecache.getline(file, line).strip(), function)


def user_line(eqn: Any) -> Where | None:
    """The innermost line of the user's own code among the frames that made `eqn`."""
    traceback = eqn.source_info.traceback
    for frame in traceback.frames if traceback is not None else ():
        if not frame.file_name.startswith(SKIPPED):
            return where_of(frame.file_name, frame.line_num, frame.function_name)
    return None


def _inexact(dtype: Any) -> bool:
    return bool(jax.dtypes.issubdtype(dtype, np.inexact))


def _known(aval: Any, value: Any, *, live: bool, name: str) -> Val:
    return Val(tuple(aval.shape), aval.dtype, live, value=value, known=True, name=name)


def _read(env: dict[Any, Val], atom: Any) -> Val:
    if isinstance(atom, jex.Literal):
        value = np.asarray(atom.val, dtype=atom.aval.dtype)  # a Python float: the aval's dtype
        return Val(value.shape, atom.aval.dtype, False, value=value, known=True, literal=True)
    return env[atom]
