"""What a custom Function's right rule is, and how opaque nodes run: a Function's forward
alone, differentiated op by op by autograd (`right_vjp`: the numeric reference's gradient
for large inputs); the registry op a one-op forward is (`single_op`: its rule texts then
say the right rule, ``torch.tanh(x)``'s); a recorded call replayed on new tensors
(`runner`); an opaque op's parameter names and a Function's backward's line."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..api.engines import relative
from .program import Where
from .torch_aten import ATEN, Emit, Unmapped, V, bound
from .torch_trace import Live, Recorded

_OPERATORS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
              ast.MatMult: "matmul", ast.Pow: "pow"}  # fmt: skip


def single_op(r: Recorded, slots: list[int]) -> Any:
    """The registry op a Function's forward is, when it is one op applied to the
    Function's float arguments in order, with no attribute (``torch.tanh(x)``, ``a * b``):
    the right rule is then that op's, and its texts say it. None otherwise."""
    from ..ops import get_op, has_op

    inner = r.inner
    outs = [t for t, tok in zip(r.out_tensors, r.outputs, strict=True) if tok is not None]
    if inner is None or len(outs) != 1 or id(outs[0]) not in inner.live:
        return None
    made = [op for op in inner.recorded if inner.live[id(outs[0])] in op.outputs]
    entry = ATEN.get(made[0].func.overloadpacket.__name__) if made else None
    if entry is None:
        return None
    op = made[0]
    inputs = sorted(inner.inputs)
    leaves, spec = tree_flatten((op.args, op.kwargs))
    if any(isinstance(v, Live) and v.token not in inputs for v in leaves):
        return None
    named = [
        V(tuple(inner.tensors[v.token].shape), inner.tensors[v.token], False,
          lambda v=v: f"a{inputs.index(v.token)}")
        if isinstance(v, Live) else v
        for v in leaves
    ]  # fmt: skip
    shapes = [tuple(t.shape) for t in op.out_tensors if t is not None]
    try:
        text = entry(Emit(_refuse, _refuse), bound(op.func, *tree_unflatten(named, spec), shapes))
        tree = ast.parse(text if isinstance(text, str) else "", mode="eval").body
    except (Unmapped, SyntaxError, TypeError):
        return None
    if isinstance(tree, ast.BinOp) and type(tree.op) in _OPERATORS:
        name, args = _OPERATORS[type(tree.op)], [tree.left, tree.right]
    elif isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and not tree.keywords:
        name, args = tree.func.id, tree.args
    else:
        return None
    order = [a.id if isinstance(a, ast.Name) else None for a in args]
    if order != [f"a{k}" for k in range(len(slots))] or not has_op(name):
        return None
    return get_op(name)


def _refuse(*args: Any) -> str:
    raise Unmapped("more than one op")


def rule_texts(op: Any) -> dict[str, tuple]:
    """Every rule text of `op`, in each spelling, as an opaque op declares them."""
    fields = {("rev", "numpy"): "rules", ("rev", "tensorflow"): "tf_rules",
              ("rev", "torch"): "torch_rules", ("rev", "jax"): "jax_rules",
              ("fwd", "numpy"): "jvp_rules", ("fwd", "tensorflow"): "tf_jvp_rules",
              ("fwd", "torch"): "torch_jvp_rules", ("fwd", "jax"): "jax_jvp_rules"}  # fmt: skip
    texts = {}
    for (mode, spelling), key in fields.items():
        said = tuple(op.rule(i, spelling, mode) for i in range(len(op.params)))
        if all(said):
            texts[key] = said
    return texts


def runner(
    r: Recorded, leaves: list, spec: Any, slots: list[int], plain: bool = False
) -> Callable[..., list]:
    """The recorded call with its tensor slots filled: its float outputs, as a list. `plain`:
    a Function's forward alone, differentiated by autograd op by op (the right rule), not
    through the user's backward."""

    def run(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        filled = list(leaves)
        for i, t in zip(slots, tensors, strict=True):
            filled[i] = t
        args, kwargs = tree_unflatten(filled, spec)
        if not r.function:
            out = r.func(*args, **kwargs)
        elif plain:
            out = _forward_alone(r.func, args, kwargs)
        else:
            out = r.func.apply(*args, **kwargs)
        return [o for o in tree_flatten(out)[0]
                if isinstance(o, torch.Tensor) and o.is_floating_point()]  # fmt: skip

    return run


def _forward_alone(cls: Any, args: tuple, kwargs: dict) -> Any:
    """A Function's forward called as a plain function, so autograd records its ops."""
    base = torch.autograd.Function
    if getattr(cls, "setup_context", None) is not getattr(base, "setup_context", None):
        return cls.forward(*args, **kwargs)  # the forward takes no ctx
    return cls.forward(torch.autograd.function.FunctionCtx(), *args, **kwargs)


def right_vjp(plain: Callable[..., list], k: int, count: int) -> Callable[..., Any]:
    """Argument `k`'s VJP by autograd of the op's forward (a Function's alone), in float64:
    the numeric reference's gradient for a large input, confirmed there by finite
    differences along random directions; a forward autograd cannot follow gives none."""

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


def param_names(r: Recorded, leaves: list, slots: list[int]) -> list[str]:
    """The opaque op's parameters: a Function's forward's names where each tensor is a
    top-level argument, else x0, x1, ..."""
    if r.function and not r.kwargs and all(i < len(r.args) for i in slots):
        try:
            names = list(inspect.signature(r.func.forward).parameters)[1:]  # after ctx
        except (TypeError, ValueError):
            names = []
        if len(names) >= len(r.args) and all(n.isidentifier() for n in names):
            picked = [names[i] for i in slots]
            if len(set(picked)) == len(picked):
                return picked
    return [f"x{k}" for k in range(len(slots))]


def backward_line(cls: type) -> Where | None:
    """Where a Function's backward is written: what its hint points the user at."""
    try:
        lines, start = inspect.getsourcelines(cls.backward)
        file = inspect.getsourcefile(cls.backward)
    except (OSError, TypeError):
        return None
    if file is None:
        return None
    return Where(relative(file), start, lines[0].strip(), f"{cls.__name__}.backward")
