"""A PyTorch function traced into a `Program`, ATen op by ATen op.

The function runs once, on the caller's values, under a ``TorchDispatchMode``: below
autograd, so every op arrives as the ATen op it is (``F.linear`` as ``t`` and ``addmm``,
``nn.LayerNorm`` as ``native_layer_norm``), as ``make_fx`` sees them, and with the grad
mode it ran in (``torch.no_grad()`` is seen). Only the ops that depend on a differentiated
input are recorded; what depends on none (a mask, an ``arange``, a parameter left out)
is a constant, its value taken when an op uses it. Every custom Function's forward is
wrapped while the function runs, so a custom Function is one opaque node (its forward's
ops are recorded apart) whose gradient is the user's backward.

The recorded ops the output needs are then written out (`torch_aten.ATEN` maps each ATen
op onto registry ops; one it cannot is an opaque node, checked by finite differences).
Running on real values follows Python control flow on tensor values (a branch on
``x.sum() > 0``): the graph is the branch these inputs take, and the result says so.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from .program import TraceError, Where

# Frames that are not the user's: torch's, gradcheck's, Python's own.
_SKIPPED = (
    *(os.path.dirname(m.__file__) + os.sep for m in (torch, sys.modules["gradcheck"])),
    sysconfig.get_paths()["stdlib"] + os.sep,
    "<frozen",
)
_VALUE_READS = {"_local_scalar_dense", "is_nonzero", "item", "equal"}
# Ops whose result depends on their tensor arguments' shapes, not their values: a
# constant, whatever they are given (an in-place one makes its tensor one).
_SHAPE_ONLY = {
    "empty_like", "zeros_like", "ones_like", "full_like", "new_empty", "new_zeros",
    "new_ones", "new_full", "new_empty_strided", "fill_", "zero_",
}  # fmt: skip


@dataclass(frozen=True)
class Live:
    """A value that depends on a differentiated input: the token of the op output it is."""

    token: int


@dataclass
class Recorded:
    """One op met while tracing: the ATen op or the Function class, its arguments with live
    tensors as `Live` (other tensors kept, as constants), the tokens of its float outputs
    (None for the others), the grad mode it ran in and the user's line."""

    func: Any
    args: tuple
    kwargs: dict
    outputs: list[int | None]
    out_tensors: list[torch.Tensor | None]
    grad_mode: bool  # as the op ran (a Function's forward runs with it off: see below)
    where: Where | None
    function: bool = False  # a torch.autograd.Function's apply
    inner: Trace | None = None  # a Function's forward, traced on its own

    @property
    def grad_enabled(self) -> bool:
        """Whether the op ran with grad on: a Function's outputs require grad where its
        apply did (its forward itself always runs with it off)."""
        if self.function:
            return any(t is not None and t.requires_grad for t in self.out_tensors)
        return self.grad_mode


@dataclass
class Trace:
    """What one run of the function recorded."""

    recorded: list[Recorded] = field(default_factory=list)
    live: dict[int, int] = field(default_factory=dict)  # id(tensor) -> token
    tensors: dict[int, torch.Tensor] = field(default_factory=dict)  # token -> its tensor
    inputs: dict[int, str] = field(default_factory=dict)  # token of an input -> its name
    kept: list[Any] = field(default_factory=list)  # every tensor seen: ids stay unique
    derived: set[int] = field(default_factory=set)  # ids of int/bool results of live values
    notes: list[str] = field(default_factory=list)
    random: list[tuple[str, Where | None]] = field(default_factory=list)
    opaque_depth: int = 0
    tokens: int = 0
    # While a custom Function's forward runs: its own ops, on its arguments (what the
    # rule would be if it were gradcheck's, `torch_build.single_op`).
    inner: Trace | None = None

    def token_of(self, tensor: torch.Tensor) -> int:
        self.tokens += 1
        self.live[id(tensor)] = self.tokens
        self.tensors[self.tokens] = tensor
        self.kept.append(tensor)
        return self.tokens

    def argument(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and id(value) in self.live:
            return Live(self.live[id(value)])
        if isinstance(value, torch.Tensor):  # a constant: its value now, as the op read it
            return value.detach().clone()
        return value

    def record(
        self, func: Any, args: tuple, kwargs: dict, out: Any, function: bool,
        inner: Trace | None = None, before: Any = None,
    ) -> None:  # fmt: skip
        """Record one op that ran; `before`, its arguments as `arguments` took them before
        it ran (an in-place op writes into a constant it reads)."""
        leaves = tree_flatten((args, kwargs))[0]
        if not any(isinstance(v, torch.Tensor) and id(v) in self.live for v in leaves):
            if any(isinstance(v, torch.Tensor) and id(v) in self.derived for v in leaves):
                self._derive(out)  # an index or mask computed from the inputs
            return  # a constant's computation
        if not function and (
            func.overloadpacket.__name__ in _SHAPE_ONLY
            or draws(func, args, kwargs)  # random draws: constants
        ):
            for t in tree_flatten(out)[0]:
                self.live.pop(id(t), None)
            return
        where = user_line()
        if not function and torch.Tag.inplace in func.tags and args[0]._is_view():
            raise TraceError(
                f"{where.quoted() if where else 'fn'} updates a view of a tensor in place "
                f"({func}): gradcheck cannot write that as a graph; write it out of place "
                "(torch.where, index_put, torch.cat), or check it through a case file"
            )
        converted = before if before is not None else self.arguments(args, kwargs)
        out_leaves = tree_flatten(out)[0]
        outputs, tensors = [], []
        for t in out_leaves:
            floating = isinstance(t, torch.Tensor) and t.is_floating_point()
            outputs.append(self.token_of(t) if floating else None)
            tensors.append(t if isinstance(t, torch.Tensor) else None)
        self._derive(out)
        self.recorded.append(
            Recorded(
                func, *converted, outputs, tensors, torch.is_grad_enabled(), where, function, inner
            )
        )

    def arguments(self, args: tuple, kwargs: dict) -> tuple:
        """The op's (args, kwargs) as recorded: live tensors as `Live`, constants copied."""
        leaves, spec = tree_flatten((args, kwargs))
        return tree_unflatten([self.argument(v) for v in leaves], spec)

    def _derive(self, out: Any) -> None:
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and not t.is_floating_point():
                self.derived.add(id(t))
                self.kept.append(t)


def draws(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the op draws random numbers here: one that may (torch tags it), unless its
    dropout probability is 0 or it is told it is not training (attention's dropout)."""
    if torch.Tag.nondeterministic_seeded not in func.tags:
        return False
    for i, argument in enumerate(func._schema.arguments):
        default = argument.default_value if argument.has_default_value() else None
        given = args[i] if i < len(args) else kwargs.get(argument.name, default)
        if argument.name in ("dropout_p", "p") and given == 0:
            return False
        if argument.name == "train" and given is False:
            return False
    return True


class _Recorder(TorchDispatchMode):
    def __init__(self, trace: Trace) -> None:
        super().__init__()
        self.trace = trace

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        trace = self.trace
        # an in-place op writes into its first argument: a constant is read before that
        before = trace.arguments(args, kwargs) if torch.Tag.inplace in func.tags else None
        out = func(*args, **kwargs)
        if draws(func, args, kwargs):
            trace.random.append((str(func.overloadpacket), user_line()))
        if trace.opaque_depth:
            if trace.opaque_depth == 1 and trace.inner is not None:
                try:
                    trace.inner.record(func, args, kwargs, out, function=False)
                except TraceError:  # what a forward does inside is its own business
                    trace.inner = None
            return out
        if func.overloadpacket.__name__ in _VALUE_READS and any(
            isinstance(a, torch.Tensor) and (id(a) in trace.live or id(a) in trace.derived)
            for a in args
        ):
            where = user_line()
            trace.notes.append(
                f"fn reads the value of a tensor that depends on the inputs at "
                f"{where.quoted() if where else 'a line of its own'}: the graph checked is "
                "the one these inputs take"
            )
        trace.record(func, args, kwargs, out, function=False, before=before)
        return out


_ACTIVE: list[Trace] = []


@contextmanager
def recording(trace: Trace) -> Iterator[None]:
    """Record the ATen ops run inside, a custom Function as one op.

    A Function is caught at its forward, which autograd looks up on the class at each
    apply: every Function class's forward (but torch's own) is wrapped while the function
    runs, so an apply bound before (``isrlu = ISRLU.apply``, a common idiom) is caught
    too."""
    wrapped = {cls: cls.__dict__.get("forward") for cls in _functions()}
    for cls in wrapped:
        cls.forward = staticmethod(_caught(cls, cls.forward))
    _ACTIVE.append(trace)
    try:
        with _Recorder(trace):
            yield
    finally:
        _ACTIVE.pop()
        for cls, original in wrapped.items():
            if original is None:
                del cls.forward
            else:
                cls.forward = original


def takes_no_ctx(cls: type) -> bool:
    """A Function written with `setup_context`: its forward has no ctx parameter."""
    base = torch.autograd.Function
    return any(
        "setup_context" in c.__dict__ for c in cls.__mro__ if issubclass(c, base) and c is not base
    )


def _functions() -> Iterator[type]:
    """Every subclass of torch.autograd.Function defined so far outside torch: torch's own
    (a hundred and more, a checkpoint's, a quantizer's) are traced through, op by op."""
    stack = [torch.autograd.Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.partition(".")[0] != "torch":
                yield sub


def _caught(cls: type, forward: Callable[..., Any]) -> Callable[..., Any]:
    """`cls`'s forward, recording the apply it runs for as one op of the active trace (its
    own ops recorded apart, `Trace.inner`)."""

    def caught(*args: Any, **kwargs: Any) -> Any:
        active = _ACTIVE[-1] if _ACTIVE else None
        if active is None or active.opaque_depth:
            return forward(*args, **kwargs)
        given = args if takes_no_ctx(cls) else args[1:]
        inner = Trace()
        for leaf in tree_flatten((given, kwargs))[0]:
            if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
                inner.inputs[inner.token_of(leaf)] = ""
        active.opaque_depth += 1
        active.inner = inner
        try:
            out = forward(*args, **kwargs)
        finally:
            active.opaque_depth -= 1
            inner, active.inner = active.inner, None
        active.record(cls, tuple(given), kwargs, out, function=True, inner=inner)
        return out

    return caught


def user_line() -> Where | None:
    """The innermost line of the caller's own code (not torch's, gradcheck's, Python's)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED):
        frame = frame.f_back
    if frame is None:
        return None
    import linecache

    file = frame.f_code.co_filename
    code = linecache.getline(file, frame.f_lineno).strip()
    return Where(_shown(file), frame.f_lineno, code, frame.f_code.co_name)


def raised_at(error: BaseException) -> Where | None:
    """The innermost line of the user's own code in `error`'s traceback."""
    import linecache

    found, tb = None, error.__traceback__
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        if not file.startswith(_SKIPPED):
            line = tb.tb_lineno
            code = linecache.getline(file, line).strip()
            found = Where(_shown(file), line, code, tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return found


@functools.lru_cache(maxsize=256)
def _shown(file: str) -> str:
    """A file as messages name it (relative to the working folder where inside it): once
    per file, not once per op."""
    from ..api.engines import relative

    return relative(file)
