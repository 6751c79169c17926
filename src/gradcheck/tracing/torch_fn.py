"""`gradcheck.torch.check`'s tracing: a function (or an ``nn.Module``) and its arguments
into a `Traced`: the program, the engine that replays it, and the function's own answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten

from ..engines.stock.torch import to_numpy
from .checking import Traced
from .program import TraceError
from .torch_build import Builder
from .torch_inputs import new_program, prepare
from .torch_opaque import engine_class
from .torch_trace import Trace, raised_at, recording


def trace(
    fn: Callable[..., Any],
    args: tuple,
    kwargs: dict,
    *,
    params: bool | None = None,
    seed: int | None = None,
) -> Traced:
    """Run `fn` once on `args` under the recorder and write what it did out as a program."""
    module = fn if isinstance(fn, torch.nn.Module) else None
    if params is None:
        params = module is not None
    if params and module is None:
        raise TraceError("params=True needs an nn.Module (its parameters become inputs)")
    target = module.forward if module is not None else fn
    inputs = prepare(target, args, kwargs, module if params else None)
    recorder = Trace()
    program = new_program(inputs, recorder)
    names = {id(t): name for name, t, differentiable in inputs.named if not differentiable}
    if seed is not None:
        torch.manual_seed(seed)
    with recording(recorder):
        try:
            out = fn(*inputs.args, **inputs.kwargs)
        except TraceError:
            raise
        except Exception as e:  # the user's own error, said as theirs, at their line
            where = raised_at(e)
            raise TraceError(
                f"{_name(fn)} raised {type(e).__name__}{f' at {where.quoted()}' if where else ''}"
                f" when traced: {e} (it runs once, on the arguments given, each "
                "differentiated tensor a leaf that requires grad)"
            ) from e
    if recorder.random and seed is None:
        op, where = recorder.random[0]
        raise TraceError(
            f"fn draws random numbers ({op}{f' at {where.quoted()}' if where else ''}): "
            "its gradient differs from call to call; pass seed= (the draws are then "
            "constants of the check), or call module.eval() to turn dropout off"
        )
    outputs = _outputs(out)
    builder = Builder(recorder, program, names)
    builder.build(outputs)
    program.notes[:0] = recorder.notes
    engine = engine_class(builder.methods, _name(fn))
    wrt = inputs.wrt

    def own_grads(cotangent: np.ndarray) -> list[np.ndarray]:
        """fn's own gradient, by autograd through what it ran (hooks included)."""
        flat = [o.reshape(-1) for o in outputs]
        whole = flat[0] if len(flat) == 1 else torch.cat(flat)
        seed_ = torch.from_numpy(np.asarray(cotangent).reshape(-1).copy()).to(whole.dtype)
        grads = torch.autograd.grad(whole, wrt, seed_, retain_graph=True, allow_unused=True)
        return [
            np.zeros(t.shape) if g is None else to_numpy(g) for g, t in zip(grads, wrt, strict=True)
        ]

    forward = [to_numpy(o) for o in outputs]
    value = forward[0] if len(forward) == 1 else np.concatenate([f.reshape(-1) for f in forward])
    return Traced(program, engine, value, own_grads, _name(fn), "torch")


def _outputs(out: Any) -> list[torch.Tensor]:
    leaves = tree_flatten(out)[0]
    if not leaves or not all(isinstance(o, torch.Tensor) for o in leaves):
        kinds = ", ".join(sorted({type(o).__name__ for o in leaves})) or "nothing"
        raise TraceError(
            f"fn returns {kinds}: gradcheck checks a function whose outputs are float "
            "tensors (return the tensor, not .item() or a NumPy array)"
        )
    if not all(o.is_floating_point() for o in leaves):
        raise TraceError("fn returns an integer or bool tensor: it has no gradient to check")
    return leaves


def _name(fn: Any) -> str:
    name = type(fn).__name__ if isinstance(fn, torch.nn.Module) else getattr(fn, "__name__", "")
    return name if name.isidentifier() and name != "<lambda>" else "fn"
