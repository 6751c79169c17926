"""PyTorch's opaque nodes: a custom Function, or an ATen op no registry op says, as an
`OpaqueCall` (what is called, with its tensors as `T` slots) and the opaque op declared
from it (`declare_call`).

The same call is made three ways: through the user's code (the engine's method: the
Function's apply, its backward the rule under test), in float64 with no gradient (the
numeric reference's forward) and, for the right rule, a Function's forward alone with
autograd recording its ops (`right_vjp`). An `OpaqueCall` is plain data apart from its
target, so a saved case's ops file declares the same op again (`tracing.saving`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten

from ..api.engines import relative
from ..ops import get_op
from .opaque import OpaqueOp, declare, rule_texts
from .program import Where
from .torch_trace import takes_no_ctx


@dataclass(frozen=True)
class T:
    """The `k`-th tensor argument of an opaque call, in its template."""

    k: int

    def __repr__(self) -> str:
        return f"T({self.k})"


@dataclass
class OpaqueCall:
    """What an opaque node calls: `target` (a Function class, or an ATen op), its `args` and
    `kwargs` with each tensor a `T`, which tensors are `integer`, how many float
    `outputs` it gives, the registry op its forward is alone (`same`, a Function's: its
    rule texts then say the right rule), and `params`, the names of its tensor arguments."""

    target: Any
    args: tuple
    kwargs: dict
    params: list[str]
    integer: list[int] = field(default_factory=list)
    outputs: int = 1
    same: str | None = None

    @property
    def function(self) -> bool:
        return isinstance(self.target, type)

    @property
    def name(self) -> str:
        if self.function:
            return self.target.__name__
        return f"aten_{self.target.overloadpacket.__name__}"

    def run(self, tensors: Sequence[torch.Tensor], plain: bool = False) -> list[torch.Tensor]:
        """The call on `tensors`: its float outputs. `plain`: a Function's forward alone,
        differentiated by autograd op by op (the right rule), not through its backward."""
        args, kwargs = fill(self.args, tensors), fill(self.kwargs, tensors)
        if not self.function:
            out = self.target(*args, **kwargs)
        elif plain:
            out = _forward_alone(self.target, args, kwargs)
        else:
            out = self.target.apply(*args, **kwargs)
        return [o for o in tree_flatten(out)[0]
                if isinstance(o, torch.Tensor) and o.is_floating_point()]  # fmt: skip


def fill(template: Any, tensors: Sequence[torch.Tensor]) -> Any:
    """`template` with each `T` slot replaced by its tensor."""
    if isinstance(template, T):
        return tensors[template.k]
    if isinstance(template, (list, tuple)):
        return type(template)(fill(v, tensors) for v in template)
    if isinstance(template, dict):
        return {k: fill(v, tensors) for k, v in template.items()}
    return template


def _forward_alone(cls: Any, args: tuple, kwargs: dict) -> Any:
    """A Function's forward called as a plain function, so autograd records its ops."""
    if takes_no_ctx(cls):
        return cls.forward(*args, **kwargs)
    return cls.forward(torch.autograd.function.FunctionCtx(), *args, **kwargs)


def declare_call(call: OpaqueCall, where: Where | None, name: str | None = None) -> OpaqueOp:
    """The opaque op `call` is, registered (as `name`, else after its target); `where` is
    the line that applied it (for an ATen op, where its node points; a Function points at
    its backward)."""
    count = call.outputs

    def forward(*arrays: np.ndarray) -> Any:
        tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]
        with torch.no_grad():
            outs = call.run(tensors)
        values = tuple(o.detach().to(torch.float64).numpy() for o in outs)
        return values if count > 1 else values[0]

    def method(engine: Any, *tensors: torch.Tensor) -> Any:
        outs = call.run(tensors)
        return tuple(outs) if count > 1 else outs[0]

    params, texts = list(call.params), {}
    if call.function:
        label = f"{call.target.__name__} (a torch.autograd.Function)"
        kind, where = "function", backward_line(call.target)
        if call.same is not None:
            params, texts = rule_texts(get_op(call.same), params)
            label += f", whose forward is {call.same}"
    else:
        label, kind = f"aten.{call.target.overloadpacket.__name__}", "framework"
    floats = [k for k in range(len(params)) if k not in call.integer]
    plain = lambda tensors: call.run(tensors, plain=True)
    opaque = declare(
        name or call.name, params=params, forward=forward, method=method, kind=kind, label=label,
        where=where, integer=[params[k] for k in call.integer],
        outputs=count if count > 1 else None, texts=texts,
        vjps=[right_vjp(plain, k, count) if k in floats else None for k in range(len(params))],
    )  # fmt: skip
    opaque.call = call
    return opaque


def engine_class(methods: dict[str, Callable[..., Any]], name: str) -> type:
    """The stock PyTorch adapter with the opaque ops' methods and the cuts'."""
    from ..engines.stock.torch import TorchEngine

    cut = {"detach": _cut, "no_grad": _cut}
    return type("TracedTorchEngine", (TorchEngine,), {
        "name": f"torch ({name}, traced)", **cut, **methods,
        "__doc__": f"{name}, replayed node by node through PyTorch",
    })  # fmt: skip


def _cut(engine: Any, x: torch.Tensor) -> torch.Tensor:
    return x.detach()


def right_vjp(plain: Callable[..., list], k: int, count: int) -> Callable[..., Any]:
    """Argument `k`'s VJP by autograd of the op's forward (a Function's alone), in float64:
    the numeric reference's gradient for a large input, confirmed there by finite
    differences along random directions."""

    def vjp(g: Any, ans: Any, *arrays: np.ndarray) -> np.ndarray:
        tensors = [torch.from_numpy(np.array(a)) for a in arrays]
        tensors[k].requires_grad_(True)
        with torch.enable_grad():
            outs = plain(tensors)
            cotangents = g if count > 1 else (g,)
            pairs = [(o, torch.from_numpy(np.array(c, np.float64)))
                     for o, c in zip(outs, cotangents, strict=True) if o.requires_grad]  # fmt: skip
            if not pairs:
                return np.zeros(np.shape(arrays[k]))
            (grad,) = torch.autograd.grad(
                [o for o, _ in pairs], [tensors[k]], [c for _, c in pairs], allow_unused=True
            )
        return np.zeros(np.shape(arrays[k])) if grad is None else grad.numpy()

    return vjp


def out_of_place(func: Any) -> Any:
    """An in-place ATen op's functional twin (``clamp_min_`` -> ``clamp_min``): an opaque
    node gets new tensors, it never writes into its arguments."""
    if torch.Tag.inplace not in func.tags:
        return func
    packet = getattr(torch.ops.aten, func.overloadpacket.__name__.rstrip("_"), None)
    twin = getattr(packet, func._overloadname, None) if packet is not None else None
    return func if twin is None else twin


def param_names(target: Any, args: tuple, kwargs: dict, count: int) -> list[str]:
    """An opaque op's parameters: a Function's forward's names where each tensor is a
    top-level positional argument, else x0, x1, ..."""
    slots = [i for i, a in enumerate(args) if isinstance(a, T)]
    if isinstance(target, type) and not kwargs and len(slots) == count:
        try:
            names = list(inspect.signature(target.forward).parameters)
        except (TypeError, ValueError):
            names = []
        names = names if takes_no_ctx(target) else names[1:]  # after ctx
        picked = [names[i] for i in slots if i < len(names)]
        if (
            len(picked) == count
            and len(set(picked)) == count
            and all(n.isidentifier() and not n.startswith("_") for n in picked)
        ):
            return picked
    return [f"x{k}" for k in range(count)]


def backward_line(cls: type) -> Where | None:
    """Where a Function's backward is written: what its hint points the user at."""
    try:
        lines, start = inspect.getsourcelines(cls.backward)
        file = inspect.getsourcefile(cls.backward)
    except (OSError, TypeError):
        return None
    if file is None:
        return None
    at = next((k for k, line in enumerate(lines) if line.strip().startswith("def ")), 0)
    return Where(relative(file), start + at, lines[at].strip(), f"{cls.__name__}.backward")
