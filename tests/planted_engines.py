"""Catalogue faults as engine files, for tests that run the command line
(`--engine tests/planted_engines.py:LeadingOnly`): the builtin engine with one fault;
and historical bugs written as they were, not as the catalogue has them (`TakeAddsBuffered`:
the catalogue's take.overwrite)."""

import numpy as np

from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.diagnosis.faults.rules import leading_only
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.ops import Op
from gradcheck.ops.registry import VJP


class LeadingOnly(FaultyEngine):
    """The seed question's unbroadcast: leading axes summed, size-1 axes not."""

    def __init__(self) -> None:
        super().__init__(FAULTS["broadcast.leading-only"])


class TanhFromInput(FaultyEngine):
    """tanh's VJP computed from its input instead of its output: `g * (1 - x**2)`."""

    def __init__(self) -> None:
        super().__init__(FAULTS["tanh.from-input"])


class ConcatFirstAxis(FaultyEngine):
    """concat's VJP splits the gradient along the first axis whatever `axis` is."""

    def __init__(self) -> None:
        super().__init__(FAULTS["concat.first-axis"])


class TakeAddsBuffered(BuiltinEngine):
    """take's VJP as HIPS autograd had it until its issue #39 (2015): the gradient added
    into zeros by `z[indices] += g`, a buffered fancy assignment, so a repeated index
    keeps one of its gradients instead of their sum (`np.add.at` accumulates)."""

    name = "builtin+take-adds-buffered"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        if op.name != "take":
            return super().vjp_rule(op, i)

        def buffered(g, ans, x, indices, axis):
            z = np.zeros_like(x)
            z[(slice(None),) * (axis % x.ndim) + (indices,)] += g
            return z

        return buffered


class SplitDropsLast(BuiltinEngine):
    """split's VJP joins the cotangents of every piece but the last, which it leaves as
    zeros: what a hand-written backward that forgets one output's cotangent gives."""

    name = "builtin+split-drops-last"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        if op.name != "split":
            return super().vjp_rule(op, i)

        def dropped(gs, ans, x, num_or_sizes, axis):
            return np.concatenate([*gs[:-1], np.zeros_like(gs[-1])], axis=axis)

        return dropped


# -- rules that raise, hang or keep state (SPEC §6.1 `raises`, `hangs`, `stateful`) ----


class SumRaisesOnAxisNone(BuiltinEngine):
    """sum's VJP puts the reduced axis back with `expand_dims`, which raises
    a TypeError for `axis=None`: the learner's `axes=None` case."""

    name = "builtin+sum-raises-on-axis-none"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        if op.name != "sum":
            return super().vjp_rule(op, i)

        def expanded(g, ans, x, axis, keepdims):
            return np.broadcast_to(g if keepdims else np.expand_dims(g, axis), x.shape)

        return expanded


class MatmulReshapesBack(BuiltinEngine):
    """matmul's VJPs reshape the product back to the operand's shape, which raises where
    the operand was broadcast along a size-1 batch axis (its gradient is never summed)."""

    name = "builtin+matmul-reshapes-back"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        if op.name != "matmul":
            return super().vjp_rule(op, i)

        def reshaped(g, ans, a, b):
            product = g @ np.swapaxes(b, -1, -2) if i == 0 else np.swapaxes(a, -1, -2) @ g
            return product.reshape((a, b)[i].shape)

        return reshaped


class MatmulAlwaysRaises(BuiltinEngine):
    """matmul's VJP calls a backend function the engine never defined."""

    name = "builtin+matmul-always-raises"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        if op.name != "matmul":
            return super().vjp_rule(op, i)

        def missing(g, ans, a, b):
            raise AttributeError("module 'backend' has no attribute 'batched_transpose'")

        return missing


class TanhLoops(BuiltinEngine):
    """tanh's VJP never returns: a loop whose condition never changes."""

    name = "builtin+tanh-loops"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        if op.name != "tanh":
            return super().vjp_rule(op, i)

        def looping(g, ans, x):
            steps = 0
            while steps >= 0:
                steps += 1
            return g * (1 - ans**2)

        return looping


class MulInPlace(BuiltinEngine):
    """mul's VJP multiplies the other operand's value by the cotangent in place
    (`b *= g; return b`): right the first time, but it changed the node's input, so a
    second identical backward pass starts from `g * b` and differs."""

    name = "builtin+mul-in-place"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        if op.name != "mul":
            return super().vjp_rule(op, i)

        def in_place(g, ans, a, b):
            other = (b, a)[i]
            other *= g
            return other

        return in_place


class Learner(BuiltinEngine):
    """A learner's first engine, four classic bugs at once: an unbroadcast that sums the
    leading axes only, used by matmul (size-1 batch axes never summed); matmul's VJP for b
    transposed (`g.T @ a` for `a.T @ g`); sub's VJP for b without its minus sign; and
    tanh's VJP with the square forgotten, `g * (1 - y)`."""

    name = "learner"

    def vjp_rule(self, op: Op, i: int) -> VJP:
        wrong: dict[tuple[str, int], VJP] = {
            ("matmul", 1): lambda g, ans, a, b: np.swapaxes(g, -1, -2) @ a,
            ("sub", 1): lambda g, ans, a, b: g,
            ("tanh", 0): lambda g, ans, x: g * (1 - ans),
        }
        return wrong.get((op.name, i)) or super().vjp_rule(op, i)

    def reduce_to_shape(self, op: Op, share: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        if op.name == "matmul":
            return leading_only(share, shape)
        return super().reduce_to_shape(op, share, shape)
