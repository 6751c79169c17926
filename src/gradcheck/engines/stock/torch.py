"""``--engine torch``: PyTorch's autograd, every op written with PyTorch's own functions.

Install with ``pip install 'gradcheck[torch]'`` (on a CPU-only machine, install
``torch`` from PyTorch's CPU wheels first; the extra then adds nothing). Inputs become
tensors of the case's dtype (bfloat16 through float32, as NumPy has no bfloat16 PyTorch
reads); gradients come from ``torch.autograd.grad`` with the cotangent as
``grad_outputs``, intermediate nodes included. Forward mode is ``torch.func.jvp`` (the
functional form, ``functional_jvp = True``: forward-mode AD proper, not the
double-backward trick); second order, ``torch.autograd.grad(..., create_graph=True)``.

Conventions at kinks and ties (SPEC §4 and §6.1), probed on PyTorch 2.13: relu'(0) = 0
and abs'(0) = 0, as TensorFlow; max/min reductions (``amax``/``amin``) split the gradient
among ties, as TensorFlow; ``maximum``/``minimum`` split a tie half and half
(TensorFlow gives it to ``a``); the exponent's gradient of ``pow`` is NaN where the base
is negative (TensorFlow: 0); selu'(0) is the negative branch's slope, scale * alpha
(TensorFlow: scale); leaky_relu'(0) = alpha and elu'(0) = alpha, as TensorFlow.

The main use is a custom op: subclass and add one method, e.g. a
``torch.autograd.Function`` for an op declared in an ``--ops`` file::

    class Engine(TorchEngine):
        def smooth_relu(self, x):
            return MySmoothRelu.apply(x)
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from .torch_conv import TorchConvOps
from .torch_elementwise import TorchElementwiseOps
from .torch_layout import TorchLayoutOps
from .torch_linalg import TorchLinalgOps
from .torch_pool import TorchPoolOps
from .torch_split import TorchSplitOps


def _dims(x: torch.Tensor, axis: Any) -> Any:
    if axis is None:  # 0-d reduces over "dim 0"; torch reads dim=() as every axis, not none
        return tuple(range(max(x.ndim, 1)))
    return tuple(axis) if isinstance(axis, list) else axis


def _reduce(fn: Any, x: torch.Tensor, axis: Any, keepdims: bool) -> torch.Tensor:
    if axis == []:  # no axis at all: nothing is reduced
        return x
    return fn(x, dim=_dims(x, axis), keepdim=keepdims)


def _getitem(x: torch.Tensor, index: tuple) -> torch.Tensor:
    """``x[index]`` for basic indices; torch refuses negative steps, so those slices are
    taken forwards and their result axes flipped."""
    consuming = sum(1 for i in index if i is not None and i is not Ellipsis)
    axis, out_axis, flips, forward = 0, 0, [], []
    for item in index:
        if item is Ellipsis:
            skipped = x.ndim - consuming
            axis, out_axis = axis + skipped, out_axis + skipped
        elif item is None:
            out_axis += 1
        elif isinstance(item, slice):
            if item.step is not None and item.step < 0:
                picked = range(*item.indices(x.shape[axis]))
                item = slice(picked[-1], picked[0] + 1, -item.step) if picked else slice(0, 0)
                flips.append(out_axis)
            axis, out_axis = axis + 1, out_axis + 1
        else:
            axis += 1
        forward.append(item)
    out = x[tuple(forward)]
    return torch.flip(out, flips) if flips else out


def _running(
    running: Any, identity: float, x: torch.Tensor, axis: int, exclusive: bool, reverse: bool
) -> torch.Tensor:
    """TensorFlow's exclusive and reverse cumsum/cumprod from PyTorch's plain ones."""
    if reverse:
        x = torch.flip(x, [axis])
    y = running(x, dim=axis)
    if exclusive:
        first = torch.full_like(x.narrow(axis, 0, 1), identity)
        y = torch.cat([first, y.narrow(axis, 0, x.shape[axis] - 1)], dim=axis)
    return torch.flip(y, [axis]) if reverse else y  # fmt: skip


class TorchEngine(
    TorchElementwiseOps, TorchLayoutOps, TorchLinalgOps, TorchConvOps, TorchPoolOps, TorchSplitOps
):
    name = "torch"
    driver = "torch"
    conventions: ClassVar[dict[str, str]] = {
        "maximum": "split",
        "minimum": "split",
        "pow": "nan",
        "selu": "negative",
    }
    higher_order = True
    functional_jvp = True

    def leaf(self, name: str, value: np.ndarray) -> torch.Tensor:
        return self.constant(value).requires_grad_(True)

    def constant(self, value: np.ndarray) -> torch.Tensor:
        if value.dtype.name == "bfloat16":
            return torch.from_numpy(value.astype(np.float32)).to(torch.bfloat16)
        return torch.from_numpy(np.array(value))

    def value(self, node: torch.Tensor) -> np.ndarray:
        return to_numpy(node)

    def grad(
        self,
        output: torch.Tensor,
        wrt: list[torch.Tensor],
        cotangent: np.ndarray,
        create_graph: bool = False,
    ) -> list[Any]:
        if create_graph:
            _refuse_once_differentiable(output)
        if not output.requires_grad:  # depends on none of wrt: zero, as TensorFlow says
            return [torch.zeros_like(t) if create_graph else np.zeros(t.shape, to_numpy(t).dtype)
                    for t in wrt]  # fmt: skip
        grads = torch.autograd.grad(
            output,
            wrt,
            grad_outputs=self.constant(cotangent),
            retain_graph=True,  # gradcheck asks twice
            allow_unused=True,
            create_graph=create_graph,  # second order: the gradients are nodes
        )
        if create_graph:
            return [
                torch.zeros_like(t) if g is None else g for g, t in zip(grads, wrt, strict=True)
            ]
        return [
            np.zeros(t.shape, to_numpy(t).dtype) if g is None else to_numpy(g)
            for g, t in zip(grads, wrt, strict=True)
        ]

    def jvp(self, fn: Any, primals: list[np.ndarray], tangents: list[np.ndarray]) -> np.ndarray:
        xs = tuple(self.constant(p) for p in primals)
        try:
            _, tangent = torch.func.jvp(fn, xs, tuple(self.constant(t) for t in tangents))
        except Exception as e:  # an op method's error arrives wrapped by gradcheck's driver
            said = _said(e)
            if said is None:
                raise
            # SPEC §12: a Function without forward mode is unsupported there, in torch's words
            raise NotImplementedError(
                f"{_function_in(said)} (a torch.autograd.Function) has no forward-mode rule; "
                f"PyTorch: {said}"
            ) from None
        return to_numpy(tangent)

    # -- linear algebra, reductions, nn --------------------------------------------------
    def matmul(self, a, b):
        return torch.matmul(a, b)

    def dot(self, a, b):
        return torch.dot(a, b)

    def outer(self, a, b):
        return torch.outer(a, b)

    def trace(self, x):
        return torch.diagonal(x, dim1=-2, dim2=-1).sum(-1)

    def diag_part(self, x):
        return torch.diagonal(x, dim1=-2, dim2=-1)

    def sum(self, x, axis=None, keepdims=False):
        return _reduce(torch.sum, x, axis, keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return _reduce(torch.mean, x, axis, keepdims)

    def max(self, x, axis=None, keepdims=False):
        return _reduce(torch.amax, x, axis, keepdims)

    def min(self, x, axis=None, keepdims=False):
        return _reduce(torch.amin, x, axis, keepdims)

    def logsumexp(self, x, axis=None, keepdims=False):
        return _reduce(torch.logsumexp, x, axis, keepdims)

    def prod(self, x, axis=None, keepdims=False):
        # torch.prod takes one dim: the axes one at a time, the highest first.
        dims = _dims(x, axis)
        dims = sorted({d % max(x.ndim, 1) for d in ([dims] if isinstance(dims, int) else dims)})
        for d in reversed(dims):
            x = torch.prod(x, dim=d, keepdim=True) if x.ndim else x
        return x if keepdims or not dims or not x.ndim else x.squeeze(tuple(dims))

    def var(self, x, axis=None, keepdims=False):
        return _reduce(lambda x, dim, keepdim: torch.var(x, dim, correction=0, keepdim=keepdim),
                       x, axis, keepdims)  # fmt: skip

    def std(self, x, axis=None, keepdims=False):
        return _reduce(lambda x, dim, keepdim: torch.std(x, dim, correction=0, keepdim=keepdim),
                       x, axis, keepdims)  # fmt: skip

    def norm(self, x, ord=2, axis=None, keepdims=False):
        order = {"inf": float("inf"), "fro": 2}.get(ord, ord)  # 'fro': the 2-norm of two axes
        dims = None if axis is None else tuple(axis) if isinstance(axis, list) else axis
        return torch.linalg.vector_norm(x, ord=order, dim=dims, keepdim=keepdims)

    def cumsum(self, x, axis=0, exclusive=False, reverse=False):
        return _running(torch.cumsum, 0.0, x, axis, exclusive, reverse)

    def cumprod(self, x, axis=0, exclusive=False, reverse=False):
        return _running(torch.cumprod, 1.0, x, axis, exclusive, reverse)

    def softmax(self, x, axis=-1):
        return torch.softmax(x, dim=axis)

    def log_softmax(self, x, axis=-1):
        return torch.log_softmax(x, dim=axis)

    # -- shape ---------------------------------------------------------------------------
    def reshape(self, x, shape):
        return torch.reshape(x, shape)

    def transpose(self, x, perm=None):
        # A tuple, not unpacked dims: `permute()` of a 0-d tensor needs an empty one.
        return x.permute(tuple(reversed(range(x.ndim))) if perm is None else tuple(perm))

    def matrix_transpose(self, x):
        return torch.transpose(x, -1, -2)

    def expand_dims(self, x, axis=0):
        return torch.unsqueeze(x, axis)

    def squeeze(self, x, axis=None):
        if axis is None or axis == []:  # TensorFlow: every size-1 axis
            return torch.squeeze(x)
        return torch.squeeze(x, dim=_dims(x, axis))

    def broadcast_to(self, x, shape):
        return torch.broadcast_to(x, shape)

    def concat(self, values, axis=0):
        return torch.cat(values, dim=axis)

    def stack(self, values, axis=0):
        return torch.stack(values, dim=axis)

    def getitem(self, x, index):
        return _getitem(x, index)

    def flip(self, x, axis=None):
        return torch.flip(x, [axis] if isinstance(axis, int) else list(axis))

    def swapaxes(self, x, axis1=None, axis2=None):
        return torch.swapaxes(x, axis1, axis2)

    # -- gathers: integer indices, int32 or int64 (PyTorch indexes with int64) -----------
    def take(self, x, indices, axis=0):
        at = axis % x.ndim
        picked = torch.index_select(x, at, indices.reshape(-1).long())
        return picked.reshape((*x.shape[:at], *indices.shape, *x.shape[at + 1 :]))

    def take_along_axis(self, x, indices, axis=-1):
        return torch.take_along_dim(x, indices.long(), dim=axis)

    def embedding(self, table, ids):
        if table.ndim != 2:  # F.embedding takes a matrix of rows only
            return self.take(table, ids, axis=0)
        return torch.nn.functional.embedding(ids.long(), table)

    def sparse_softmax_cross_entropy(self, logits, labels):
        # F.cross_entropy has the classes on dim 1 (or alone, unbatched): ours are last.
        classes_first = logits if logits.ndim == 1 else torch.movedim(logits, -1, 1)
        return torch.nn.functional.cross_entropy(classes_first, labels.long(), reduction="none")


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's value as NumPy: bfloat16 through float32, as NumPy has no bfloat16."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.float().numpy().astype(ml_dtypes.bfloat16)
    return tensor.numpy().copy()


def _refuse_once_differentiable(output: torch.Tensor) -> None:
    """SPEC §12: second order through a Function whose backward is @once_differentiable is
    unsupported, in torch's words (torch would give zeros, or a grad that is no node)."""
    seen, stack = set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        backward = getattr(getattr(node, "_forward_cls", None), "backward", None)
        code = getattr(backward, "__code__", None)
        if code is not None and code.co_filename.endswith(
            ("autograd/function.py", "autograd\\function.py")
        ):
            name = node._forward_cls.__name__
            raise NotImplementedError(
                f"{name}'s backward is marked @once_differentiable: PyTorch cannot "
                "differentiate it again (second order)"
            )
        stack.extend(next_fn for next_fn, _ in node.next_functions)


def _said(error: BaseException | None) -> BaseException | None:
    """The error in `error`'s chain in which torch says a Function has no forward mode: the
    deepest (torch's own, not a wrapper's), whose traceback holds the Function's apply."""
    found = None
    while error is not None:
        if "setup_context" in str(error) or "jvp function" in str(error):
            found = error
        error = error.__cause__ or error.__context__
    return found


def _function_in(error: BaseException) -> str:
    """The autograd.Function whose apply raised `error`, by name ("a Function" if unseen)."""
    tb = error.__traceback__
    while tb is not None:
        cls = tb.tb_frame.f_locals.get("cls")
        if isinstance(cls, type) and issubclass(cls, torch.autograd.Function):
            return cls.__name__
        tb = tb.tb_next
    return "a Function"
