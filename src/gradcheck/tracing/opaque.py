"""Opaque nodes: what a traced function does that no registry op says, as ops of its own.

A custom gradient (a ``torch.autograd.Function``, a ``jax.custom_vjp``) or a framework op
that maps onto nothing becomes one node of the traced expression. It is declared as a
user op (SPEC §9) whose NumPy forward runs the framework's forward, in float64, so the
numeric reference differentiates it by finite differences, and whose engine method runs
the user's code with the framework's autodiff: the rule under test. Its shape rule is
the shapes seen while tracing, the forward asked where it meets others.

The stop ops (`STOP_LABELS`) are the places where a function cuts its own gradient: a torch
``.detach()``, a value computed under ``torch.no_grad()``, a ``jax.lax.stop_gradient``.
Their forward is the identity (what finite differences and TensorFlow see); their engine
method cuts, as the user's code did; so a cut that changes the gradient fails at that
node, with mechanism `zero`, and is named for what it is.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ops import registry
from ..ops.registry import Op, ShapeError
from ..ops.user import RESERVED
from .program import Binding, Program, Where

Shape = tuple[int, ...]


@dataclass
class OpaqueOp:
    """One opaque op: its registry declaration, the engine method that runs the user's code,
    what it is (`kind`: "function" or "framework") and where the user wrote it
    (for a custom gradient, its backward; for a framework op or a cut, the call)."""

    op: Op
    method: Callable[..., Any]
    kind: str
    label: str  # "MyTanh (a torch.autograd.Function)", "aten.atan", "`.detach()`"
    where: Where | None = None
    call: Any = None  # the framework's description of what it calls (saved with the case)
    # argument shapes seen -> the output's shape (a tuple of shapes for several outputs)
    shapes: dict[tuple[Shape, ...], Any] = field(default_factory=dict)


def declare(
    name: str,
    *,
    params: Sequence[str],
    forward: Callable[..., Any],
    method: Callable[..., Any],
    kind: str,
    label: str,
    where: Where | None,
    integer: Sequence[str] = (),
    outputs: int | None = None,
    vjps: Sequence[Callable[..., Any] | None] = (),
    texts: dict[str, tuple] | None = None,
) -> OpaqueOp:
    """Register an opaque op named `name` (made unique) and return it with its method.

    `forward` takes and returns NumPy arrays; the caller fills the op's `shapes` with
    those it saw, before the expression is parsed. `vjps`, where given, are the right
    rules, by the framework's autodiff of the forward (None for an integer argument);
    `texts`, the rule texts by field (``rules``, ``torch_rules``, ...), where known.
    """
    seen: dict[tuple[Shape, ...], Any] = {}

    def shape(*arg_shapes: Shape) -> Any:
        key = tuple(tuple(s) for s in arg_shapes)
        if key not in seen:
            seen[key] = _shape_by_running(forward, key, integer, params, name)
        return seen[key]

    origin = str(where) if where is not None else f"<traced {kind}>"
    op = Op(
        name=unique_name(name, origin),
        params=tuple(params),
        shape=shape,
        forward=forward,
        doc=label,
        origin=origin,
        integer=tuple(integer),
        vjps=tuple(vjps),
        **(texts or {}),
        outputs=None if outputs is None else (lambda *shapes, **attrs: outputs),
    )
    registry.register(op)
    return OpaqueOp(op, method, kind, label, where, shapes=seen)


def unique_name(wanted: str, origin: str) -> str:
    """`wanted` as an op name no other op holds: a builtin's name gets ``_custom`` (a
    user's ``tanh``), the engine protocol's ``_op``, a user op's from elsewhere a number
    (an op of the same origin is replaced)."""
    base = wanted.lstrip("_") or "opaque"
    if base in RESERVED:
        base = f"{base}_op"
    if registry.has_op(base) and registry.get_op(base).origin is None:
        base = f"{base}_custom"
    name, k = base, 1
    while registry.has_op(name) and registry.get_op(name).origin != origin:
        k += 1
        name = f"{base}_{k}"
    return name


def _shape_by_running(
    forward: Callable[..., Any],
    shapes: tuple[Shape, ...],
    integer: Sequence[str],
    params: Sequence[str],
    name: str,
) -> Any:
    """The output shape(s) for argument shapes not seen while tracing: the forward run on
    zeros of those shapes (indices zero: always in range)."""
    args = [
        np.zeros(s, np.int64 if p in integer else np.float64)
        for s, p in zip(shapes, params, strict=True)
    ]
    try:
        out = forward(*args)
    except Exception as e:  # the user's code on shapes it was not traced at
        raise ShapeError(f"{name} cannot run at shapes {list(shapes)}: {e}") from None
    if isinstance(out, tuple):
        return tuple(tuple(np.shape(o)) for o in out)
    return tuple(np.shape(out))


def rule_texts(op: Op, params: Sequence[str]) -> tuple[list[str], dict[str, tuple]]:
    """The parameter names and every rule text of `op`, in each spelling, for an opaque op
    whose forward is `op` and whose own parameters are `params` (the user's names, where
    they clash with none the texts use: `g`, `y`, `t`, ...; else `op`'s)."""
    fields = {("rev", "numpy"): "rules", ("rev", "tensorflow"): "tf_rules",
              ("rev", "torch"): "torch_rules", ("rev", "jax"): "jax_rules",
              ("fwd", "numpy"): "jvp_rules", ("fwd", "tensorflow"): "tf_jvp_rules",
              ("fwd", "torch"): "torch_jvp_rules", ("fwd", "jax"): "jax_jvp_rules"}  # fmt: skip
    texts = {}
    for (mode, spelling), key in fields.items():
        said = tuple(op.rule(i, spelling, mode) for i in range(len(op.params)))
        if all(said):
            texts[key] = said
    used = {name for said in texts.values() for text in said for name in _names(text)}
    renamed = dict(zip(op.params, params, strict=True))
    if set(params) & (used - set(op.params)) or len(set(params)) != len(params):
        return list(op.params), texts  # the user's names would read as something else
    return list(params), {k: tuple(_renamed(t, renamed) for t in v) for k, v in texts.items()}


def _names(text: str) -> set[str]:
    return {tok.string for tok in _tokens(text) if tok.type == tokenize.NAME}


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(text).readline))


def _renamed(text: str, renamed: dict[str, str]) -> str:
    """`text` (one line) with its variables renamed, not attributes (`np.swapaxes` stays)."""
    out, at, previous = [], 0, None
    for tok in _tokens(text):
        if tok.type == tokenize.NAME and tok.string in renamed and previous != ".":
            start, end = tok.start[1], tok.end[1]
            out += [text[at:start], renamed[tok.string]]
            at = end
        previous = tok.string
    return "".join([*out, text[at:]])


# -- the stop ops ----------------------------------------------------------------------

STOP_LABELS = {
    "detach": "`.detach()`",
    "no_grad": "a value computed under `torch.no_grad()`",
    "stop_gradient": "`jax.lax.stop_gradient`",
}
# What to write instead of each cut, where the value should carry its gradient.
STOP_FIXES = {
    "detach": "use the tensor itself where its gradient should flow, not `t.detach()`",
    "no_grad": "compute it outside `with torch.no_grad():` (for an in-place write under "
    "it, write a new tensor: `w = w.clamp(...)`)",
    "stop_gradient": "use the value itself where its gradient should flow, not "
    "`jax.lax.stop_gradient(v)`",
}


def cuts(program: Program) -> list[tuple[Binding, str]]:
    """The program's cuts: each binding that is a stop op's call, with the stop's name."""
    found = []
    for b in program.bindings:
        stop = b.text.partition("(")[0]
        if stop in STOP_LABELS and b.text.endswith(")"):
            found.append((b, stop))
    return found


def stop_op(name: str) -> Op:
    """The stop op `name` (one of `STOP_LABELS`), declared on first use: the identity, for
    finite differences and TensorFlow, whose right rule passes `g` on."""
    if registry.has_op(name):
        return registry.get_op(name)
    return registry.register(
        Op(
            name=name,
            params=("x",),
            shape=lambda x: x,
            forward=lambda x: x,
            vjps=(lambda g, ans, x: g,),
            jvps=(lambda t, ans, x: t,),
            tf=lambda tf, x: tf.identity(x),
            tf_name="tf.identity (gradcheck differentiates through the cut)",
            doc=f"{STOP_LABELS[name]} in a traced function: the identity, whose gradient "
            "the function cuts",
            origin=f"<traced {name}>",
            rules=("g",),
            tf_rules=("g",),
            jvp_rules=("t",),
            tf_jvp_rules=("t",),
            torch_rules=("g",),
            jax_rules=("g",),
            torch_jvp_rules=("t",),
            jax_jvp_rules=("t",),
        )
    )
