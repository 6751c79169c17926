"""A PyTorch trace written out as a `Program`, and the engine that replays it.

The ops the outputs need are walked in the order they ran. Each ATen op becomes what
`torch_aten.ATEN` writes for it, or an opaque node; each custom Function an opaque node
running the user's Function; a ``.detach()`` and a value computed under
``torch.no_grad()`` and read with grad on, a stop node (`opaque.stop_op`). A binding is
named after the variable the user's line assigns (``h = self.fc1(x)``: ``h``), else
after its op. The engine is the stock PyTorch adapter with one method per opaque op.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..engines.stock.torch import to_numpy
from .opaque import OpaqueOp, stop_op
from .program import Program, TraceError, Where, assigned_name, call, is_part, numpy_dtype
from .torch_aten import ATEN, Emit, Unmapped, V, bound
from .torch_opaque import OpaqueCall, T, declare_call, out_of_place, param_names
from .torch_rules import single_op
from .torch_trace import Live, Recorded, Trace


class Builder:
    """One trace being written out into `program`."""

    def __init__(self, trace: Trace, program: Program, names: dict[int, str]) -> None:
        self.trace, self.program = trace, program
        self.names = names  # id of a constant tensor argument -> the parameter's name
        self.text: dict[int, str] = dict(trace.inputs)
        self.no_grad: set[int] = set()  # tokens computed under torch.no_grad()
        self.stopped: dict[int, str] = {}
        self.constants: dict[tuple[int, int], str] = {}
        self.opaque: dict[tuple, OpaqueOp] = {}
        self.methods: dict[str, Callable[..., Any]] = {}
        self.needed: set[int] = set()  # the tokens the outputs depend on

    # -- the walk ------------------------------------------------------------------------
    def build(self, outputs: list[torch.Tensor]) -> None:
        wanted = [self.trace.live.get(id(t)) for t in outputs]
        if any(t is None for t in wanted):
            raise TraceError(
                "fn's output does not depend on any differentiated input: its gradient is "
                "zero; check that fn uses its tensor arguments"
            )
        needed = set(wanted)
        kept: list[Recorded] = []
        for r in reversed(self.trace.recorded):
            if needed & set(r.outputs):
                kept.append(r)
                needed.update(v.token for v in tree_flatten((r.args, r.kwargs))[0]
                              if isinstance(v, Live))  # fmt: skip
        kept.reverse()
        self.needed = needed
        last = {_line_key(r): r for r in kept}
        for r in kept:
            self._write(r, named=last[_line_key(r)] is r)
        self.program.set_outputs([self._read(t, grad_enabled=True) for t in wanted], "tensors")

    def _write(self, r: Recorded, named: bool) -> None:
        if r.function:
            texts = self._opaque(r, reason=None)
        else:
            name = r.func.overloadpacket.__name__
            if name == "detach":
                stop_op("detach")
                texts = [call("detach", self._read(r.args[0].token, r.grad_enabled, r.where))]
            else:
                texts = self._mapped(r)
        wanted = assigned_name(r.where) if named else None
        kept = self._keeps_gradient(r)
        for token, text in zip(r.outputs, texts, strict=False):
            if token is None or text is None:
                continue
            if text.isidentifier() or is_part(text):
                self.text[token] = text
            else:
                base = wanted or (r.func.__name__ if r.function else r.func.overloadpacket.__name__)
                self.text[token] = self.program.bind(base, text, _made_by(r), r.where)
            if kept is not None:  # the new value, with the old one's gradient
                stop_op("no_grad")
                moved = self.program.bind(
                    "no_grad", call("no_grad", f"{self.text[token]} - {kept}"),
                    "torch.no_grad()", r.where,
                )  # fmt: skip
                self.text[token] = self.program.bind(
                    wanted or "updated", f"{kept} + {moved}", _made_by(r), r.where
                )
                kept = None
            elif not r.grad_enabled:
                self.no_grad.add(token)

    def _keeps_gradient(self, r: Recorded) -> str | None:
        """What an in-place op under no_grad writes into a tensor that carries a gradient
        keeps: that tensor's gradient (autograd never saw the write), its value the op's.
        The old value's text, or None for any other op."""
        if r.function or r.grad_enabled or torch.Tag.inplace not in r.func.tags:
            return None
        first = r.args[0] if r.args else None
        if not isinstance(first, Live) or first.token in self.no_grad:
            return None
        return self.text[first.token]

    def _mapped(self, r: Recorded) -> list[str | None]:
        entry = ATEN.get(r.func.overloadpacket.__name__.rstrip("_"))
        if entry is None:
            return self._opaque(r, reason="no gradcheck op says it")
        shapes = [tuple(t.shape) if t is not None else () for t in r.out_tensors]
        arguments = tree_unflatten(
            [self._value(v, r) for v in tree_flatten((r.args, r.kwargs))[0]],
            tree_flatten((r.args, r.kwargs))[1],
        )
        emit = Emit(self._bind_part(r), self._constant)
        mark = self.program.mark()
        try:
            out = entry(emit, bound(r.func, *arguments, shapes))
            texts = out if isinstance(out, list) else [out]
            if any(tok in self.needed and (k >= len(texts) or texts[k] is None)
                   for k, tok in enumerate(r.outputs)):  # fmt: skip
                raise Unmapped("an output it has no op for is used")
        except Unmapped as why:
            self.program.rollback(mark)  # what the entry wrote before it gave up
            return self._opaque(r, reason=str(why))
        except Exception as e:  # a gap in gradcheck's table: the node is still checked
            self.program.rollback(mark)
            return self._opaque(r, reason=f"gradcheck's mapping of it failed: {e!r}")
        return texts

    def _bind_part(self, r: Recorded) -> Callable[[str, str], str]:
        return lambda text, wanted: self.program.bind(wanted, text, _made_by(r), r.where)

    # -- values --------------------------------------------------------------------------
    def _value(self, v: Any, r: Recorded) -> Any:
        if isinstance(v, Live):
            t = self.trace.tensors[v.token]
            text = self._read(v.token, r.grad_enabled, r.where)
            return V(tuple(t.shape), False, lambda: t, lambda: text)
        if isinstance(v, torch.Tensor):
            return V(tuple(v.shape), True, lambda: v, lambda: self._constant_of(v))
        return v

    def _read(self, token: int, grad_enabled: bool, where: Where | None = None) -> str:
        """A live value's text, read by an op that ran with grad on or off: a value computed
        under no_grad and read with grad on is cut there (a `no_grad` stop node)."""
        text = self.text[token]
        if grad_enabled and token in self.no_grad:
            if token not in self.stopped:
                stop_op("no_grad")
                self.stopped[token] = self.program.bind(
                    "no_grad", call("no_grad", text), "torch.no_grad()", where
                )
            return self.stopped[token]
        return text

    def _constant_of(self, t: torch.Tensor) -> str:
        key = (id(t), t._version)
        if key not in self.constants:
            hint = self.names.get(id(t), "c")
            self.constants[key] = self._constant(to_numpy(t), hint, not t.is_floating_point())
        return self.constants[key]

    def _constant(self, value: np.ndarray, hint: str, integer: bool) -> str:
        if not integer:
            value = value.astype(numpy_dtype(self.program.dtype))
        return self.program.add_input(hint, value, False)

    # -- opaque nodes --------------------------------------------------------------------
    def _opaque(self, r: Recorded, reason: str | None) -> list[str | None]:
        leaves, spec = tree_flatten((r.args, r.kwargs))
        tensors = [v for v in leaves if isinstance(v, (Live, torch.Tensor))]
        slot = {id(v): k for k, v in reversed(list(enumerate(tensors)))}  # by identity
        template = [T(slot[id(v)]) if id(v) in slot else v for v in leaves]
        args, kwargs = tree_unflatten(template, spec)
        key = (r.func, repr((args, kwargs)))
        if key not in self.opaque:
            self.opaque[key] = self._declare(r, args, kwargs, tensors, reason)
        opaque = self.opaque[key]
        shapes = tuple(tuple(self._array(v).shape) for v in tensors)
        outs = [tuple(t.shape) for t, tok in zip(r.out_tensors, r.outputs, strict=True)
                if tok is not None]  # fmt: skip
        opaque.shapes[shapes] = tuple(outs) if len(outs) > 1 else outs[0]
        text = call(opaque.op.name, *(self._argument(v, r) for v in tensors))
        floats = [k for k, tok in enumerate(r.outputs) if tok is not None]
        if len(floats) == 1:
            return [text if k == floats[0] else None for k in range(len(r.outputs))]
        parts = self.program.bind(opaque.op.name, text, _made_by(r), r.where)
        index = {k: f"{parts}[{j}]" for j, k in enumerate(floats)}
        return [index.get(k) for k in range(len(r.outputs))]

    def _argument(self, leaf: Any, r: Recorded) -> str:
        if isinstance(leaf, Live):
            return self._read(leaf.token, r.grad_enabled, r.where)
        return self._constant_of(leaf)

    def _array(self, leaf: Any) -> torch.Tensor:
        return self.trace.tensors[leaf.token] if isinstance(leaf, Live) else leaf

    def _declare(
        self, r: Recorded, args: tuple, kwargs: dict, tensors: list, reason: str | None
    ) -> OpaqueOp:
        integer = [k for k, v in enumerate(tensors) if not self._array(v).is_floating_point()]
        count = sum(1 for t in r.outputs if t is not None)
        params = param_names(r.func, args, kwargs, len(tensors))
        floats = [k for k in range(len(tensors)) if k not in integer]
        same = single_op(r, floats) if r.function else None
        if same is not None and len(same.params) != len(tensors):
            same = None
        target = r.func if r.function else out_of_place(r.func)
        opaque_call = OpaqueCall(target, args, kwargs, params, integer, count,
                                 same.name if same else None)  # fmt: skip
        opaque = declare_call(opaque_call, r.where)
        if not r.function:
            self.program.notes.append(
                f"{opaque.label}{f' at {r.where}' if r.where else ''} maps to no gradcheck op "
                f"({reason}): checked as one opaque node, by finite differences of "
                "PyTorch's forward"
            )
        self.methods[opaque.op.name] = opaque.method
        self.program.opaque[opaque.op.name] = opaque
        return opaque


def _floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _made_by(r: Recorded) -> str:
    return f"{r.func.__name__}.apply" if r.function else f"aten.{r.func.overloadpacket.__name__}"


def _line_key(r: Recorded) -> Any:
    return (r.where.file, r.where.line) if r.where else id(r)
