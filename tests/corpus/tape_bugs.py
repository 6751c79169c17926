"""Planted bugs in the tape engine: each class is `tape_engine.Engine` with one bug.

Each overrides one seam of the engine and says in its docstring what is wrong; the
registry in `__init__.py` names the case that shows it and the hint gradcheck should
give first::

    gradcheck run tests/corpus/cases/elementwise.yaml -k mul_plus_other \\
        --engine tests/corpus/tape_bugs.py:MulSelf
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

# gradcheck loads this file by path: make its sibling importable either way.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from tape_engine import Engine as TapeEngine
from tape_engine import Entry, Shares, Var, reduced_axes


class BroadcastNoReduce(TapeEngine):
    """Gradients are never summed back to the argument's shape: unbroadcast is a no-op."""

    def unbroadcast(self, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return share


class MulSelf(TapeEngine):
    """mul's gradient for a is g * a, the argument itself, instead of g * b."""

    def _vjp_mul(self, g, out, a, b) -> Shares:
        return g * a, g * a


class DivSign(TapeEngine):
    """div's gradient for the denominator lost its minus sign: +g * a / b**2."""

    def _vjp_div(self, g, out, a, b) -> Shares:
        return g / b, g * a / (b * b)


class PowExponent(TapeEngine):
    """pow's gradient for the base keeps the exponent: g * b * a**b, not a**(b - 1)."""

    def _vjp_pow(self, g, out, a, b) -> Shares:
        _, for_exponent = super()._vjp_pow(g, out, a, b)
        return g * b * a**b, for_exponent


class MeanTotalSize(TapeEngine):
    """mean's gradient divides by the input's total size, not by the number of elements
    each mean averages."""

    def _vjp_mean(self, g, out, x, *, axis, keepdims) -> Shares:
        return (np.broadcast_to(self._kept(g, x, axis, keepdims), x.shape) / x.size,)


class MaxAllTies(TapeEngine):
    """max/min give the whole gradient to every tied element instead of splitting it."""

    def _tie_weights(self, winners: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return winners


class TransposePermNotInverted(TapeEngine):
    """transpose's gradient applies perm again instead of its inverse."""

    def _vjp_transpose(self, g, out, x, *, perm) -> Shares:
        return (np.transpose(g, perm),)


class NoUpstream(TapeEngine):
    """Every VJP is fed ones instead of the upstream gradient: no chain rule."""

    def _upstream(self, grads: dict[Var, np.ndarray], entry: Entry) -> np.ndarray:
        return np.ones_like(grads[entry.output])


class SigmoidForwardIsTanh(TapeEngine):
    """Not in the catalogue: the forward pass computes sigmoid as tanh."""

    def sigmoid(self, x: Var) -> Var:
        return self._unary("sigmoid", x, np.tanh)


# -- catalogue faults added with the mechanism probes ----------------------------------


class BroadcastLeadingKept(TapeEngine):
    """unbroadcast sums with keepdims=True everywhere: the extra leading axes stay, as
    size 1, in the gradient's shape."""

    def unbroadcast(self, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        padded = (1,) * (share.ndim - len(shape)) + tuple(shape)
        axes = tuple(i for i, d in enumerate(padded) if d == 1 and share.shape[i] != 1)
        return share.sum(axis=axes, keepdims=True) if axes else share


class PowDividesByBase(TapeEngine):
    """pow's gradient for the base is written from the output, g * b * y / a: 0/0 at a = 0."""

    def _vjp_pow(self, g, out, a, b) -> Shares:
        _, for_exponent = super()._vjp_pow(g, out, a, b)
        return g * b * out / a, for_exponent


class MaximumMaskOnly(TapeEngine):
    """maximum's gradient is the winner mask alone: g is never multiplied in."""

    def _vjp_maximum(self, g, out, a, b) -> Shares:
        a_wins = np.broadcast_to(a >= b, g.shape)
        return a_wins.astype(g.dtype), (~a_wins).astype(g.dtype)


class MeanFirstAxis(TapeEngine):
    """mean's gradient divides by len(x), the first axis, whatever the mean reduces."""

    def _vjp_mean(self, g, out, x, *, axis, keepdims) -> Shares:
        return (np.broadcast_to(self._kept(g, x, axis, keepdims), x.shape) / len(x),)


class GetitemSliceShape(TapeEngine):
    """getitem's gradient stays at the slice's shape: never scattered into zeros of x's."""

    def _vjp_getitem(self, g, out, x, *, index) -> Shares:
        return (g,)


class ConcatFirstAxis(TapeEngine):
    """concat's gradient is split along axis 0 whatever axis the values were joined on."""

    def _vjp_concat(self, g, out, *xs, axis) -> Shares:
        ends = np.cumsum([x.shape[axis] for x in xs])
        return tuple(np.split(g, ends[:-1], axis=0))


class MatmulUntransposed(TapeEngine):
    """matmul's gradients multiply by the other operand untransposed, g @ b and a @ g;
    on non-square operands the shapes do not even multiply."""

    def _vjp_matmul(self, g, out, a, b) -> Shares:
        return g @ b, a @ g


# -- mechanisms (SPEC §6.1): bugs the catalogue does not know ------------------------


class TanhIgnoresUpstream(TapeEngine):
    """tanh's gradient is its local derivative 1 - y**2 alone: g is dropped."""

    def _vjp_tanh(self, g, out, x) -> Shares:
        return (1 - out * out,)


class TanhClipsGradient(TapeEngine):
    """tanh's gradient clips the upstream g to [-1, 1] first: not linear in g."""

    def _vjp_tanh(self, g, out, x) -> Shares:
        return (np.clip(g, -1.0, 1.0) * (1 - out * out),)


class ExpPassesGradient(TapeEngine):
    """exp's gradient is g itself: the factor exp(x) is forgotten."""

    def _vjp_exp(self, g, out, x) -> Shares:
        return (g,)


class SinDetached(TapeEngine):
    """sin's gradient is zero, as if its input were detached from the graph."""

    def _vjp_sin(self, g, out, x) -> Shares:
        return (np.zeros_like(g),)


class SquareNoTwo(TapeEngine):
    """square's gradient is g * x: the factor 2 is missing."""

    def _vjp_square(self, g, out, x) -> Shares:
        return (g * x,)


class SinSign(TapeEngine):
    """sin's gradient is -g * cos(x): the derivative of cos's sign slipped in."""

    def _vjp_sin(self, g, out, x) -> Shares:
        return (-g * np.cos(x),)


class MatmulTransposedB(TapeEngine):
    """matmul's gradient for b is g^T @ a, the right one transposed."""

    def _vjp_matmul(self, g, out, a, b) -> Shares:
        for_a, _ = super()._vjp_matmul(g, out, a, b)
        return for_a, np.swapaxes(g, -1, -2) @ a


class UnbroadcastNoKeepdims(TapeEngine):
    """unbroadcast sums the size-1 axes away without keepdims: (3,) where b is (3, 1)."""

    def unbroadcast(self, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        lead = share.ndim - len(shape)
        if lead > 0:
            share = share.sum(axis=tuple(range(lead)))
        ones = tuple(i for i, d in enumerate(shape) if d == 1 and share.shape[i] != 1)
        return share.sum(axis=ones) if ones else share


class SigmoidNaive(TapeEngine):
    """sigmoid's gradient is written as exp(-x) / (1 + exp(-x))**2, which is inf / inf
    once exp(-x) overflows."""

    def _vjp_sigmoid(self, g, out, x) -> Shares:
        e = np.exp(-x)
        return (g * e / (1 + e) ** 2,)


class MaxMaskOnlyNotMin(TapeEngine):
    """max's gradient (not min's: `_vjp_min` is the base class's) is the tie-split
    winner mask alone, without g."""

    def _vjp_max(self, g, out, x, *, axis, keepdims) -> Shares:
        winners = x == self._kept(out, x, axis, keepdims)
        return (winners / winners.sum(axis=reduced_axes(axis, x.ndim), keepdims=True),)


class DivByCube(TapeEngine):
    """div's gradient for the denominator divides by b**3: a formula no probe names."""

    def _vjp_div(self, g, out, a, b) -> Shares:
        return g / b, -g * a / b**3


class ReluHalf(TapeEngine):
    """A convention, not a bug: relu'(0) = 0.5 (TensorFlow takes 0), undeclared."""

    def _vjp_relu(self, g, out, x) -> Shares:
        return (g * np.where(x == 0, 0.5, x > 0),)


# -- the backward driver (SPEC §6.1 `backprop-driver`): every rule right, the walk wrong --


def _recursive_grad(
    engine: TapeEngine, output: Var, wrt: Sequence[Var], cotangent: np.ndarray, *, once: bool
) -> list[np.ndarray]:
    """A recursive walk from the output: each entry passes its output's gradient on, then
    recurses into its inputs at once; `once`: an entry already walked is not walked again."""
    made_by = {entry.output: entry for entry in engine.tape}
    grads, walked = engine._seed(output, cotangent), set()

    def backprop(var: Var) -> None:
        entry = made_by.get(var)
        if entry is None or (once and var in walked):
            return
        walked.add(var)
        engine._pass_on(grads, entry)
        for arg in entry.inputs:
            backprop(arg)

    backprop(output)
    return [np.array(grads.get(v, np.zeros_like(v.value))) for v in wrt]


class RecursiveBackward(TapeEngine):
    """Per path (karpathy/micrograd#2, sebgao/cTensor#5): the walk recurses into an entry's
    inputs as soon as it has passed its gradient on, so a value reached by two paths
    passes on what it has each time, its first share twice."""

    def grad(self, output: Var, wrt: Sequence[Var], cotangent: np.ndarray) -> list[np.ndarray]:
        return _recursive_grad(self, output, wrt, cotangent, once=False)


class VisitedOnFirstPath(TapeEngine):
    """Early propagation (TrenTorch/TrenTorch#182, lucasdelimanogueira/PyNorch#90): the
    recursive walk marks a value walked on its first path, so it passes its gradient on
    before the second path has added to it, and never again."""

    def grad(self, output: Var, wrt: Sequence[Var], cotangent: np.ndarray) -> list[np.ndarray]:
        return _recursive_grad(self, output, wrt, cotangent, once=True)


class OverwriteAtFanOut(TapeEngine):
    """No accumulation: a value used twice keeps the share of the entry walked last."""

    def accumulate(self, grads: dict[Var, np.ndarray], var: Var, share: np.ndarray) -> None:
        grads[var] = share


class FirstInputOnly(TapeEngine):
    """A node skipped: the walk traces back from the last entry through each entry's first
    input only, so an entry reached only through a second input never passes its gradient on."""

    def _walk(self) -> Iterator[Entry]:
        made_by = {entry.output: entry for entry in self.tape}
        entry = self.tape[-1] if self.tape else None
        while entry is not None:
            yield entry
            entry = made_by.get(entry.inputs[0]) if entry.inputs else None


class KeepsGradients(TapeEngine):
    """Never zeroed (karpathy/micrograd#102): the gradient table lives on the engine between
    calls, and only the inputs' entries are reset, so a second call adds onto the first."""

    def _seed(self, output: Var, cotangent: np.ndarray) -> dict[Var, np.ndarray]:
        kept: dict[Var, np.ndarray] = self.__dict__.setdefault("kept", {})
        made = {entry.output for entry in self.tape}
        for var in [v for v in kept if v not in made]:
            del kept[var]
        kept[output] = np.asarray(cotangent, output.value.dtype)
        return kept


class AddsLaterSharesTwice(TapeEngine):
    """Not a story gradcheck knows (zou-group/textgrad#200 had the same addition written
    twice): where a value already has a gradient, each further share is added twice."""

    def accumulate(self, grads: dict[Var, np.ndarray], var: Var, share: np.ndarray) -> None:
        grads[var] = grads[var] + 2 * share if var in grads else share
