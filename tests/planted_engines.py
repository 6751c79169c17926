"""Catalogue faults as engine files, for tests that run the command line
(`--engine tests/planted_engines.py:LeadingOnly`): the builtin engine with one fault;
and one historical bug the catalogue has no entry for yet (`TakeAddsBuffered`)."""

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
