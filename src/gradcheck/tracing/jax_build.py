"""A JAX trace written out as a `Program`, and the opaque ops its engine runs.

The steps the outputs need are walked in the order JAX runs them. Each primitive becomes
what `jax_primitives.LAX` writes for it, or an opaque node; each custom rule an opaque
node running the user's rule; a ``stop_gradient`` a stop node (`opaque.stop_op`). A
constant an op reads is an input of the case (an integer one for indices), or a literal
where it is one number. A binding is named after the variable the user's line assigns
(``h = jnp.tanh(x)``: ``h``), else after its primitive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ops import get_op
from .jax_opaque import Equation, JaxCall, declare_call
from .jax_primitives import LAX, Emit, Eqn, Unmapped, V
from .jax_rules import param_names, single_op
from .jax_trace import Step, Trace, Val
from .lax_table import number
from .opaque import OpaqueOp, stop_op
from .program import Program, TraceError, assigned_name, call, is_part, numpy_dtype

CASE_FILE = "or write the case in a case file (`gradcheck run`)"
# Shorter binding names for the primitives whose own are long
_SHORT = {"dot_general": "product", "broadcast_in_dim": "broadcast", "integer_pow": "power",
          "conv_general_dilated": "conv", "convert_element_type": "cast",
          "reduce_window_max": "pool", "reduce_window_min": "pool", "reduce_window_sum": "pool",
          "dynamic_slice": "sliced", "select_n": "select", "concatenate": "concat",
          **{f"reduce_{k}": k for k in ("sum", "max", "min", "prod")}}  # fmt: skip


class Builder:
    """One trace being written out into `program`."""

    def __init__(self, trace: Trace, program: Program) -> None:
        self.trace, self.program = trace, program
        self.text: dict[Val, str] = dict(zip(trace.inputs, program.wrt, strict=True))
        self.constants: dict[Val, str] = {}
        self.opaque: dict[tuple, OpaqueOp] = {}
        self.declared: dict[tuple[str, str | None], int] = {}  # (name, origin) -> ops so named
        self.methods: dict[str, Callable[..., Any]] = {}

    # -- the walk ------------------------------------------------------------------------
    def build(self, outputs: list[Val]) -> None:
        needed = {v.step.index for v in outputs if v.step is not None}
        kept: list[Step] = []
        for step in reversed(self.trace.steps):
            if step.index in needed and step.live:
                kept.append(step)
                needed.update(v.step.index for v in step.inputs if v.live and v.step is not None)
        kept.reverse()
        last = {_line_key(s): s for s in kept}
        for step in kept:
            self._write(step, named=last[_line_key(step)] is step)
        self.program.set_outputs([self.text[v] for v in outputs], "arrays")

    def _write(self, step: Step, named: bool) -> None:
        complex_ = next((v for v in step.outputs if v.live and not v.floating), None)
        if complex_ is not None:
            at = f" at {step.where.quoted()}" if step.where else ""
            raise TraceError(
                f"fn computes a {complex_.dtype} value{at}: gradcheck checks real gradients; "
                f"write the function on real and imaginary parts as real arrays, {CASE_FILE}"
            )
        if step.name == "stop_gradient":
            stop_op("stop_gradient")
            texts: list[str | None] = [call("stop_gradient", self.text[step.inputs[0]])]
        elif step.custom:
            texts = self._opaque(step, reason=None)
        else:
            texts = self._mapped(step)
        wanted = assigned_name(step.where) if named else None
        for val, text in zip(step.outputs, texts, strict=True):
            if not val.live or text is None:
                continue
            if text.isidentifier() or is_part(text):
                self.text[val] = text
            else:
                self.text[val] = self.program.bind(wanted or _base(step), text, _made_by(step),
                                                   step.where)  # fmt: skip

    def _mapped(self, step: Step) -> list[str | None]:
        entry = LAX.get(step.name)
        if entry is None:
            return self._opaque(step, reason="no gradcheck op says it")
        args = [self._operand(v) for v in step.inputs]
        shapes = [v.shape for v in step.outputs]
        eqn = Eqn(step.name, args, dict(step.eqn.params), shapes, self.program.dtype)
        emit = Emit(self._bind_part(step), self._constant)
        mark = self.program.mark()
        try:
            out = entry(emit, eqn)
        except Unmapped as why:
            self.program.rollback(mark)  # what the entry wrote before it gave up
            return self._opaque(step, reason=str(why))
        except Exception as e:  # a gap in gradcheck's table: the node is still checked
            self.program.rollback(mark)
            return self._opaque(step, reason=f"gradcheck's mapping of it failed: {e!r}")
        return out if isinstance(out, list) else [out]

    def _bind_part(self, step: Step) -> Callable[[str, str], str]:
        return lambda text, wanted: self.program.bind(wanted, text, _made_by(step), step.where)

    # -- values --------------------------------------------------------------------------
    def _operand(self, v: Val) -> V:
        value = lambda: np.asarray(self.trace.value(v))
        if v.live:
            return V(v.shape, False, value, lambda: self.text[v], v.dtype)
        return V(v.shape, True, value, lambda: self._constant_of(v), v.dtype)

    def _constant_of(self, v: Val) -> str:
        """A constant's text: a number where it is one (a literal), else an input."""
        value = np.asarray(self.trace.value(v))
        if value.ndim == 0 and value.dtype.kind in "fiu":
            return number(float(value)) if value.dtype.kind == "f" else str(int(value))
        return self._constant_input(v)

    def _constant_input(self, v: Val) -> str:
        if v not in self.constants:
            value = np.asarray(self.trace.value(v))
            self.constants[v] = self._constant(value, v.name or "c", value.dtype.kind != "f")
        return self.constants[v]

    def _constant(self, value: np.ndarray, hint: str, integer: bool) -> str:
        value = value.astype(np.int64 if integer else numpy_dtype(self.program.dtype))
        return self.program.add_input(hint, value, False)

    # -- opaque nodes --------------------------------------------------------------------
    def _opaque(self, step: Step, reason: str | None) -> list[str | None]:
        slots = [i for i, v in enumerate(step.inputs) if not v.literal]
        key = _key(step, slots)
        if key not in self.opaque:
            self.opaque[key] = self._declare(step, slots, reason)
        opaque = self.opaque[key]
        args = [self.text[step.inputs[i]] if step.inputs[i].live
                else self._constant_input(step.inputs[i]) for i in slots]  # fmt: skip
        outs = [v.shape for v in step.outputs if v.live]
        opaque.shapes[tuple(step.inputs[i].shape for i in slots)] = (
            tuple(outs) if len(outs) > 1 else outs[0]
        )
        text = call(opaque.op.name, *args)
        live = [k for k, v in enumerate(step.outputs) if v.live]
        if len(live) == 1:
            return [text if k == live[0] else None for k in range(len(step.outputs))]
        parts = self.program.bind(opaque.op.name, text, _made_by(step), step.where)
        index = {k: f"{parts}[{j}]" for j, k in enumerate(live)}
        return [index.get(k) for k in range(len(step.outputs))]

    def _declare(self, step: Step, slots: list[int], reason: str | None) -> OpaqueOp:
        target = Equation(step.eqn)
        integer = [k for k, i in enumerate(slots) if not step.inputs[i].floating]
        same = single_op(step) if step.custom and not integer else None
        names = param_names(step, slots)
        if names is None:  # the user's are unknown: the op's where the primal is one
            names = list(get_op(same).params) if same else [f"x{k}" for k in range(len(slots))]
        call = JaxCall(
            target, names, fixed={i: v.value for i, v in enumerate(step.inputs) if v.literal},
            picks=[k for k, v in enumerate(step.outputs) if v.live], integer=integer, same=same,
        )  # fmt: skip
        if step.custom:
            name, where = target.name, target.rule_line()
        else:
            name, where = f"lax_{step.name.replace('-', '_')}", step.where  # scatter-add
            self.program.notes.append(
                f"lax.{step.name}{f' at {step.where}' if step.where else ''} maps to no "
                f"gradcheck op ({reason}): checked as one opaque node, by finite differences "
                "of JAX's forward"
            )
        # the same op again elsewhere (another shape, other literals): a name of its own,
        # as one name of one origin is one op of the registry
        origin = str(where) if where is not None else None
        k = self.declared[(name, origin)] = self.declared.get((name, origin), 0) + 1
        opaque = declare_call(call, step.where, name if k == 1 else f"{name}{k}")
        self.methods[opaque.op.name] = opaque.method
        self.program.opaque[opaque.op.name] = opaque
        return opaque


# A custom rule's parameters that are functions (printed with their addresses): its rule
# stands for them in the key
_RULES = ("bwd", "fwd_jaxpr_thunk", "jvp_jaxpr_fun", "out_trees")


def _key(step: Step, slots: list[int]) -> tuple:
    """What makes two steps one opaque op: the same equation (its parameters, custom rules'
    primals included, printed), at the same shapes, with the same literals."""
    params = tuple(sorted((k, str(v)) for k, v in step.eqn.params.items() if k not in _RULES))
    rule = Equation(step.eqn).rule_line() if step.custom else None
    literals = tuple(repr(v.value.tolist()) for v in step.inputs if v.literal)
    shapes = tuple((step.inputs[i].shape, str(step.inputs[i].dtype)) for i in slots)
    return step.name, str(rule), params, literals, shapes


def _base(step: Step) -> str:
    """A step's name for its binding: a custom rule's function's, a primitive's own."""
    return Equation(step.eqn).name if step.custom else _SHORT.get(step.name, step.name)


def _made_by(step: Step) -> str:
    if step.custom:
        return f"{_base(step)} (a jax.{step.name.removesuffix('_call')})"
    return "jax.lax.stop_gradient" if step.name == "stop_gradient" else step.name


def _line_key(step: Step) -> Any:
    return (step.where.file, step.where.line) if step.where else id(step)
