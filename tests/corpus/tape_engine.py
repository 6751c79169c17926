"""A Wengert-list ("tape") reverse-mode engine over NumPy: a correct engine of the corpus.

Every op method computes its value with NumPy and appends one `Entry` to the engine's
tape: the op's name, the slots it read, the slot it wrote and its attributes. The tape
is therefore in topological order by construction, and `grad` needs no graph search:
it walks the tape backwards once. For each entry whose output has received gradient,
the op's VJP (`_vjp_<op>`) turns the upstream gradient into one share per input,
`unbroadcast` sums each share back to its input's shape, and `accumulate` adds it to
whatever that input already has, so a value used several times gets the sum.

The small seams are what `tape_bugs.py` overrides, one bug per subclass: a `_vjp_<op>`
method, `_tie_weights`, `unbroadcast`, `accumulate`, `_upstream`, the walk's `_seed`,
`_walk` or `grad` itself, or an op method for a wrong forward pass. Supports every op of SPEC §3.

    gradcheck run cases/ --engine tests/corpus/tape_engine.py
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

Axis = int | Sequence[int] | None
Shares = tuple[np.ndarray, ...]


class Var:
    """One slot of the tape: a value. Compared by identity, so it can key dicts."""

    __slots__ = ("name", "value")

    def __init__(self, value: Any, name: str | None = None) -> None:
        self.value = np.asarray(value)
        self.name = name

    def __repr__(self) -> str:
        return f"Var({self.name or '?'}, shape={self.value.shape})"


class Entry(NamedTuple):
    """One recorded op application: `output = op(*inputs, **attrs)`."""

    op: str
    inputs: tuple[Var, ...]
    output: Var
    attrs: dict[str, Any]


def reduced_axes(axis: Axis, ndim: int) -> tuple[int, ...]:
    """`axis=None|int|list` as a sorted tuple of non-negative axes (None: every axis)."""
    if axis is None:
        return tuple(range(ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    return tuple(sorted(a % ndim for a in axes))


class Engine:
    """Reverse mode over a Wengert list of NumPy values."""

    name = "tape"

    def __init__(self) -> None:
        self.tape: list[Entry] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = f"tape/{cls.__name__}"  # a planted bug shows up under its own name

    # -- the adapter protocol -------------------------------------------------------------
    def leaf(self, name: str, value: np.ndarray) -> Var:
        return Var(value, name)

    def constant(self, value: np.ndarray) -> Var:
        return Var(value)

    def value(self, node: Var) -> np.ndarray:
        return node.value

    def grad(self, output: Var, wrt: Sequence[Var], cotangent: np.ndarray) -> list[np.ndarray]:
        """Walk the tape backwards once, from `output` seeded with `cotangent`."""
        grads = self._seed(output, cotangent)
        for entry in self._walk():
            if entry.output in grads:  # else not on a path to the output
                self._pass_on(grads, entry)
        return [np.array(grads.get(v, np.zeros_like(v.value))) for v in wrt]

    # -- seams of the backward walk -----------------------------------------------------
    def _seed(self, output: Var, cotangent: np.ndarray) -> dict[Var, np.ndarray]:
        """A fresh gradient table holding the output's."""
        return {output: np.asarray(cotangent, output.value.dtype)}

    def _walk(self) -> Iterator[Entry]:
        """The entries in the order they pass their gradients on: the tape, backwards."""
        return reversed(self.tape)

    def _pass_on(self, grads: dict[Var, np.ndarray], entry: Entry) -> None:
        """Add `entry`'s share of its output's gradient to each of its inputs'."""
        vjp = getattr(self, f"_vjp_{entry.op}")
        g, out = self._upstream(grads, entry), entry.output.value
        inputs = [v.value for v in entry.inputs]
        with np.errstate(all="ignore"):  # inf and nan are results, not warnings
            shares = vjp(g, out, *inputs, **entry.attrs)
        for var, share in zip(entry.inputs, shares, strict=True):
            self.accumulate(grads, var, self.unbroadcast(share, var.value.shape))

    def _upstream(self, grads: dict[Var, np.ndarray], entry: Entry) -> np.ndarray:
        """The gradient flowing into `entry` from the output: what its VJP multiplies."""
        return grads[entry.output]

    def unbroadcast(self, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Sum a share in the broadcast shape back to `shape`: over the extra leading
        axes, and (keeping them) over the axes where the input had size 1."""
        lead = share.ndim - len(shape)
        if lead > 0:
            share = share.sum(axis=tuple(range(lead)))
        ones = tuple(i for i, d in enumerate(shape) if d == 1 and share.shape[i] != 1)
        return share.sum(axis=ones, keepdims=True) if ones else share

    def accumulate(self, grads: dict[Var, np.ndarray], var: Var, share: np.ndarray) -> None:
        """Add `share` to `var`'s gradient: a value used twice gets both contributions."""
        grads[var] = grads[var] + share if var in grads else share

    # -- recording ------------------------------------------------------------------------
    def _record(self, op: str, inputs: Sequence[Var], value: Any, **attrs: Any) -> Var:
        out = Var(value)
        self.tape.append(Entry(op, tuple(inputs), out, attrs))
        return out

    def _unary(self, op: str, x: Var, fn: Any) -> Var:
        with np.errstate(all="ignore"):
            return self._record(op, [x], fn(x.value))

    def _binary(self, op: str, a: Var, b: Var, fn: Any) -> Var:
        with np.errstate(all="ignore"):
            return self._record(op, [a, b], fn(a.value, b.value))

    # -- elementwise binary ops (VJPs return the broadcast shape; `unbroadcast` reduces)
    def add(self, a: Var, b: Var) -> Var:
        return self._binary("add", a, b, np.add)

    def sub(self, a: Var, b: Var) -> Var:
        return self._binary("sub", a, b, np.subtract)

    def mul(self, a: Var, b: Var) -> Var:
        return self._binary("mul", a, b, np.multiply)

    def div(self, a: Var, b: Var) -> Var:
        return self._binary("div", a, b, np.divide)

    def pow(self, a: Var, b: Var) -> Var:
        return self._binary("pow", a, b, np.power)

    def maximum(self, a: Var, b: Var) -> Var:
        return self._binary("maximum", a, b, np.maximum)

    def minimum(self, a: Var, b: Var) -> Var:
        return self._binary("minimum", a, b, np.minimum)

    def _vjp_add(self, g, out, a, b) -> Shares:
        return g, g

    def _vjp_sub(self, g, out, a, b) -> Shares:
        return g, -g

    def _vjp_mul(self, g, out, a, b) -> Shares:
        return g * b, g * a

    def _vjp_div(self, g, out, a, b) -> Shares:
        return g / b, -g * a / (b * b)

    def _vjp_pow(self, g, out, a, b) -> Shares:
        # TensorFlow takes the exponent's gradient as 0 where the base is not positive.
        log_a = np.log(np.where(a > 0, a, 1)) * (a > 0)
        return g * b * a ** (b - 1), g * out * log_a

    def _vjp_maximum(self, g, out, a, b) -> Shares:
        a_wins = a >= b  # a tie goes to a, as in TensorFlow
        return g * a_wins, g * ~a_wins

    def _vjp_minimum(self, g, out, a, b) -> Shares:
        a_wins = a <= b
        return g * a_wins, g * ~a_wins

    # -- elementwise unary ops ------------------------------------------------------------
    def neg(self, x: Var) -> Var:
        return self._unary("neg", x, np.negative)

    def exp(self, x: Var) -> Var:
        return self._unary("exp", x, np.exp)

    def log(self, x: Var) -> Var:
        return self._unary("log", x, np.log)

    def sqrt(self, x: Var) -> Var:
        return self._unary("sqrt", x, np.sqrt)

    def abs(self, x: Var) -> Var:
        return self._unary("abs", x, np.abs)

    def square(self, x: Var) -> Var:
        return self._unary("square", x, np.square)

    def sin(self, x: Var) -> Var:
        return self._unary("sin", x, np.sin)

    def cos(self, x: Var) -> Var:
        return self._unary("cos", x, np.cos)

    def tanh(self, x: Var) -> Var:
        return self._unary("tanh", x, np.tanh)

    def sigmoid(self, x: Var) -> Var:
        return self._unary("sigmoid", x, lambda v: 1 / (1 + np.exp(-v)))

    def relu(self, x: Var) -> Var:
        return self._unary("relu", x, lambda v: np.maximum(v, 0))

    def _vjp_neg(self, g, out, x) -> Shares:
        return (-g,)

    def _vjp_exp(self, g, out, x) -> Shares:
        return (g * out,)

    def _vjp_log(self, g, out, x) -> Shares:
        return (g / x,)

    def _vjp_sqrt(self, g, out, x) -> Shares:
        return (g * 0.5 / out,)

    def _vjp_abs(self, g, out, x) -> Shares:
        return (g * np.sign(x),)  # abs'(0) = 0

    def _vjp_square(self, g, out, x) -> Shares:
        return (g * 2 * x,)

    def _vjp_sin(self, g, out, x) -> Shares:
        return (g * np.cos(x),)

    def _vjp_cos(self, g, out, x) -> Shares:
        return (-g * np.sin(x),)

    def _vjp_tanh(self, g, out, x) -> Shares:
        return (g * (1 - out * out),)

    def _vjp_sigmoid(self, g, out, x) -> Shares:
        return (g * out * (1 - out),)

    def _vjp_relu(self, g, out, x) -> Shares:
        return (g * (x > 0),)  # relu'(0) = 0

    # -- linear algebra -------------------------------------------------------------------
    def matmul(self, a: Var, b: Var) -> Var:
        return self._binary("matmul", a, b, np.matmul)

    def _vjp_matmul(self, g, out, a, b) -> Shares:
        # Swap the last two axes only; `unbroadcast` then sums over broadcast batch axes.
        return g @ np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2) @ g

    # -- reductions -----------------------------------------------------------------------
    def sum(self, x: Var, axis: Axis = None, keepdims: bool = False) -> Var:
        return self._reduce("sum", x, np.sum, axis, keepdims)

    def mean(self, x: Var, axis: Axis = None, keepdims: bool = False) -> Var:
        return self._reduce("mean", x, np.mean, axis, keepdims)

    def max(self, x: Var, axis: Axis = None, keepdims: bool = False) -> Var:
        return self._reduce("max", x, np.max, axis, keepdims)

    def min(self, x: Var, axis: Axis = None, keepdims: bool = False) -> Var:
        return self._reduce("min", x, np.min, axis, keepdims)

    def logsumexp(self, x: Var, axis: Axis = None, keepdims: bool = False) -> Var:
        def stable(v: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
            peak = np.max(v, axis=axis, keepdims=True)
            peak = np.where(np.isfinite(peak), peak, 0)
            out = np.log(np.sum(np.exp(v - peak), axis=axis, keepdims=True)) + peak
            return out if keepdims else np.squeeze(out, axis=axis)

        return self._reduce("logsumexp", x, stable, axis, keepdims)

    def _reduce(self, op: str, x: Var, fn: Any, axis: Axis, keepdims: bool) -> Var:
        axes = reduced_axes(axis, x.value.ndim)
        with np.errstate(all="ignore"):
            value = fn(x.value, axis=axes, keepdims=keepdims)
        return self._record(op, [x], value, axis=axis, keepdims=keepdims)

    @staticmethod
    def _kept(g: np.ndarray, x: np.ndarray, axis: Axis, keepdims: bool) -> np.ndarray:
        """A reduction's output-shaped array with the reduced axes back, as size 1."""
        return g if keepdims else np.expand_dims(g, reduced_axes(axis, x.ndim))

    def _vjp_sum(self, g, out, x, *, axis, keepdims) -> Shares:
        return (np.broadcast_to(self._kept(g, x, axis, keepdims), x.shape),)

    def _vjp_mean(self, g, out, x, *, axis, keepdims) -> Shares:
        count = np.prod([x.shape[i] for i in reduced_axes(axis, x.ndim)])
        return (np.broadcast_to(self._kept(g, x, axis, keepdims), x.shape) / count,)

    def _vjp_max(self, g, out, x, *, axis, keepdims) -> Shares:
        winners = x == self._kept(out, x, axis, keepdims)
        weights = self._tie_weights(winners, reduced_axes(axis, x.ndim))
        return (self._kept(g, x, axis, keepdims) * weights,)

    _vjp_min = _vjp_max

    def _tie_weights(self, winners: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """Each winner's share of the gradient: ties split it equally, as TensorFlow does."""
        return winners / winners.sum(axis=axes, keepdims=True)

    def _vjp_logsumexp(self, g, out, x, *, axis, keepdims) -> Shares:
        return (self._kept(g, x, axis, keepdims) * np.exp(x - self._kept(out, x, axis, keepdims)),)

    # -- shape ops ------------------------------------------------------------------------
    def reshape(self, x: Var, shape: Sequence[int]) -> Var:
        return self._record("reshape", [x], np.reshape(x.value, shape), shape=shape)

    def transpose(self, x: Var, perm: Sequence[int] | None = None) -> Var:
        return self._record("transpose", [x], np.transpose(x.value, perm), perm=perm)

    def matrix_transpose(self, x: Var) -> Var:
        return self._record("matrix_transpose", [x], np.swapaxes(x.value, -1, -2))

    def expand_dims(self, x: Var, axis: int = 0) -> Var:
        return self._record("expand_dims", [x], np.expand_dims(x.value, axis), axis=axis)

    def squeeze(self, x: Var, axis: Axis = None) -> Var:
        if axis is None or axis == []:  # TensorFlow: no axes named squeezes every size-1 axis
            axes = tuple(i for i, d in enumerate(x.value.shape) if d == 1)
        else:
            axes = reduced_axes(axis, x.value.ndim)
        return self._record("squeeze", [x], np.squeeze(x.value, axes), axis=axis)

    def broadcast_to(self, x: Var, shape: Sequence[int]) -> Var:
        return self._record("broadcast_to", [x], np.broadcast_to(x.value, shape), shape=shape)

    def getitem(self, x: Var, index: tuple) -> Var:
        return self._record("getitem", [x], x.value[index], index=index)

    def concat(self, values: Sequence[Var], axis: int = 0) -> Var:
        joined = np.concatenate([v.value for v in values], axis=axis)
        return self._record("concat", values, joined, axis=axis)

    def stack(self, values: Sequence[Var], axis: int = 0) -> Var:
        return self._record("stack", values, np.stack([v.value for v in values], axis), axis=axis)

    def _vjp_reshape(self, g, out, x, *, shape) -> Shares:
        return (np.reshape(g, x.shape),)

    def _vjp_transpose(self, g, out, x, *, perm) -> Shares:
        order = range(x.ndim)[::-1] if perm is None else perm
        return (np.transpose(g, np.argsort(order)),)  # the inverse permutation

    def _vjp_matrix_transpose(self, g, out, x) -> Shares:
        return (np.swapaxes(g, -1, -2),)

    def _vjp_expand_dims(self, g, out, x, *, axis) -> Shares:
        return (np.reshape(g, x.shape),)

    def _vjp_squeeze(self, g, out, x, *, axis) -> Shares:
        return (np.reshape(g, x.shape),)

    def _vjp_broadcast_to(self, g, out, x, *, shape) -> Shares:
        return (g,)  # `unbroadcast` sums it back to x's shape

    def _vjp_getitem(self, g, out, x, *, index) -> Shares:
        scattered = np.zeros_like(x, dtype=g.dtype)
        scattered[index] = g  # basic indexing never repeats an element
        return (scattered,)

    def _vjp_concat(self, g, out, *xs, axis) -> Shares:
        ends = np.cumsum([x.shape[axis] for x in xs])
        return tuple(np.split(g, ends[:-1], axis=axis))

    def _vjp_stack(self, g, out, *xs, axis) -> Shares:
        return tuple(np.moveaxis(g, axis, 0))

    # -- nn -------------------------------------------------------------------------------
    def softmax(self, x: Var, axis: int = -1) -> Var:
        e = np.exp(x.value - np.max(x.value, axis=axis, keepdims=True))
        return self._record("softmax", [x], e / e.sum(axis=axis, keepdims=True), axis=axis)

    def log_softmax(self, x: Var, axis: int = -1) -> Var:
        shifted = x.value - np.max(x.value, axis=axis, keepdims=True)
        value = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        return self._record("log_softmax", [x], value, axis=axis)

    def _vjp_softmax(self, g, out, x, *, axis) -> Shares:
        # The Jacobian is diag(s) - s s^T: every output of a row moves every input.
        return (out * (g - np.sum(g * out, axis=axis, keepdims=True)),)

    def _vjp_log_softmax(self, g, out, x, *, axis) -> Shares:
        return (g - np.exp(out) * np.sum(g, axis=axis, keepdims=True),)
