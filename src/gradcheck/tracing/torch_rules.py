"""What a custom Function's right rule is, where its forward is one registry op applied
to its arguments (`single_op`: ``torch.tanh(x)``, ``x @ w``): that op's rule texts then
say the right rule in every fix, in the user's names."""

from __future__ import annotations

import ast
from typing import Any

from torch.utils._pytree import tree_flatten, tree_unflatten

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
        V(tuple(inner.tensors[v.token].shape), False, lambda v=v: inner.tensors[v.token],
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
