"""A PyTorch function's arguments, ready to trace: each tensor named (the function's
parameters' names, a module's parameters by theirs), the differentiated ones picked as
``torch.autograd.gradcheck`` picks them and made fresh leaves, what cannot be checked
(complex, sparse) refused; and the program those inputs start."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..engines.stock.torch import to_numpy
from .program import Program, TraceError
from .torch_trace import Trace


@dataclass
class Inputs:
    """The function's arguments, ready to trace: the call's args and kwargs with each
    differentiated tensor a fresh leaf, and every tensor named."""

    args: tuple
    kwargs: dict
    named: list[tuple[str, torch.Tensor, bool]]  # name, the tensor the call gets, differentiated

    @property
    def wrt(self) -> list[torch.Tensor]:
        return [t for _, t, d in self.named if d]


def prepare(
    fn: Callable[..., Any], args: tuple, kwargs: dict, module: torch.nn.Module | None
) -> Inputs:
    """Name the tensors `fn` gets (its parameters' names; a module's parameters by theirs)
    and pick the differentiated ones, as torch.autograd.gradcheck does: the float tensors
    that require grad, or, where none does, every float tensor."""
    import inspect

    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        given = list(bound.arguments.items())
    except (TypeError, ValueError):
        given = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    found: list[tuple[str, torch.Tensor]] = []
    for name, value in given:
        found += [(n, t) for n, t in _tensors(name, value)]
    params = [] if module is None else list(module.named_parameters())
    for name, t in found + params:
        _refuse_kind(name, t)
    floats = [t for _, t in found if t.is_floating_point()]
    asked = [t for t in floats if t.requires_grad] or floats
    asked_ids = {id(t) for t in asked}
    fresh = {id(t): t.detach().clone().requires_grad_(True) for t in asked}
    leaves, spec = tree_flatten((args, kwargs))
    call_args, call_kwargs = tree_unflatten([fresh.get(id(v), v) for v in leaves], spec)
    named = [(n, fresh.get(id(t), t), id(t) in asked_ids) for n, t in found]
    named += [(f"{name}", p, p.requires_grad) for name, p in params]
    if not any(d for _, _, d in named):
        raise TraceError("fn has no float tensor argument to differentiate")
    return Inputs(call_args, call_kwargs, named)


def _tensors(name: str, value: Any) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _tensors(f"{name}_{i}", v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _tensors(f"{name}_{k}", v)


def _refuse_kind(name: str, t: torch.Tensor) -> None:
    """Complex and sparse tensors are out of reach: said, with what to do instead."""
    if t.is_complex():
        raise TraceError(
            f"{name} is a complex tensor ({t.dtype}): gradcheck checks real gradients; "
            "check the real and imaginary parts as two real inputs (torch.view_as_real), "
            "or write the case with real inputs in a case file"
        )
    if t.layout != torch.strided:
        raise TraceError(
            f"{name} is a {t.layout} tensor: gradcheck checks dense tensors; pass "
            f"{name}.to_dense(), or write the case in a case file"
        )


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def new_program(inputs: Inputs, trace: Trace) -> Program:
    """The program's inputs: each differentiated tensor and each constant tensor argument,
    named as `prepare` named them, their tokens known to `trace`."""
    dtypes = sorted({dtype_name(t) for _, t, d in inputs.named if d})
    if len(dtypes) > 1:
        raise TraceError(
            f"the differentiated inputs are in {' and '.join(dtypes)}: gradcheck checks one "
            "dtype at a time; cast them to one"
        )
    program = Program(dtypes[0])
    for name, t, differentiable in inputs.named:
        if differentiable:
            token = trace.token_of(t)
            trace.inputs[token] = program.add_input(name, to_numpy(t), True)
    return program
