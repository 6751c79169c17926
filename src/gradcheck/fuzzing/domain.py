"""Which generated cases are fair tests of an engine.

A case is fair when two correct engines must agree on it up to rounding: every value
is finite and moderate, every op's arguments lie in the domain the registry declares
for them (`Op.domain`), and no kinked op (`Op.kink`) sits *near* its kink, where
rounding alone decides which side an engine lands on (``relu(a * b - c)`` at 1e-9).
*At* a kink exactly is fair only when kinks are the target (inputs drawn as small
integers, so zeros and ties are exact in every engine), since TensorFlow's convention
there is part of the contract (SPEC §3) -- except for the ops whose kinks the engine
declares a convention of its own for (SPEC §4 `conventions`): those are kept away from
their kinks always. A matrix an op inverts (`Op.conditioned`, `Op.symmetric`) must be
diagonally dominant, so well-conditioned (positive definite where symmetric). The values
are the builtin engine's, which the test suite holds to TensorFlow op by op.
"""

from __future__ import annotations

import numpy as np

from ..cases.dtypes import numpy_dtype
from ..cases.model import Case
from ..engines.builtin.engine import BuiltinEngine
from ..engines.driver import EngineFailure, EngineRun, Unsupported, build_expression
from ..expression import Node
from ..ops.broadcast import normalize_axes
from ..ops.pooling import window_distance
from ..ops.registry import DOMINANCE

VALUE_BOUND = 100.0  # larger values make rounding differences larger than the tolerances


def kink_gap(dtype: str) -> float:
    """How far from a kink or a tie a value must stay: far beyond the dtype's rounding."""
    return max(1e-2, 16 * float(np.finfo(numpy_dtype(dtype)).eps))


class Unfair(Exception):
    """The case leaves an op's domain, or sits near a kink: not a fair test."""


def admissible(
    case: Case, *, kinks: bool, own_conventions: frozenset[str] = frozenset()
) -> EngineRun | None:
    """The builtin engine's forward value and gradients of `case`, or None where it cannot
    differentiate the case (a user op declared without NumPy VJPs). `Unfair` if the case
    is not a fair test."""
    engine, expression = BuiltinEngine(), case.expression
    try:
        built = build_expression(
            engine, expression, case.inputs, set(case.wrt), case.cotangent.dtype
        )
    except EngineFailure as e:  # a singular matrix inverted: outside the op's domain
        if isinstance(e.__cause__, np.linalg.LinAlgError):
            raise Unfair from e
        raise
    except Unsupported:  # forward values only
        engine, built = (
            None,
            build_expression(BuiltinEngine(), expression, case.inputs, set(), case.cotangent.dtype),
        )
    # An op with several outputs (split) has a value per output, each its part's node's.
    values = {node: np.asarray(t.value) for node, t in built.items() if not node.is_multi}
    gap = kink_gap(case.dtype)
    if not all(_moderate(v) for v in values.values()) or not all(
        _fair(node, values, kinks=kinks and node.op.name not in own_conventions, gap=gap)
        for node in expression.op_nodes
    ):
        raise Unfair
    if engine is None:
        return None
    wrt = [built[expression.lookup(name)] for name in case.wrt]
    grads = engine.grad(built[expression.output], wrt, case.cotangent)
    if not all(np.isfinite(g).all() for g in grads):
        raise Unfair
    return EngineRun(values[expression.output], dict(zip(case.wrt, grads, strict=True)))


def _moderate(value: np.ndarray) -> bool:
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(value) <= VALUE_BOUND))  # NaN fails too


def _fair(node: Node, values: dict[Node, np.ndarray], *, kinks: bool, gap: float) -> bool:
    op = node.op
    assert op is not None
    args = [values[a] for a in node.args]
    if not op.variadic:
        for param, interval in op.domain.items():
            if not np.all(interval.contains(args[op.params.index(param)].astype(np.float64))):
                return False
        for param in {*op.conditioned, *op.symmetric}:
            if not dominant(args[op.params.index(param)], symmetric=param in op.symmetric):
                return False
    if op.kink is None:
        return True
    distance = kink_distance(node, args)
    near = (distance < gap) & ((distance != 0) | (not kinks))
    return not near.any()


def dominant(matrix: np.ndarray, *, symmetric: bool = False) -> bool:
    """Whether each matrix of the last two axes is diagonally dominant by `DOMINANCE` (so
    invertible and well-conditioned, and so is each of its triangles); `symmetric`: also
    symmetric with a positive diagonal, so positive definite."""
    m = matrix.astype(np.float64)
    diag = np.diagonal(m, axis1=-2, axis2=-1)
    rest = np.sum(np.abs(m), axis=-1) - np.abs(diag)
    if not np.all(np.abs(diag) - rest >= DOMINANCE):
        return False
    return not symmetric or bool(np.all(m == np.swapaxes(m, -1, -2)) and np.all(diag > 0))


def make_dominant(shape: tuple[int, ...], values: tuple[float, ...], symmetric: bool) -> tuple:
    """`values` (row-major, of `shape`) made diagonally dominant: each diagonal element
    becomes, with its sign (positive where `symmetric`, the lower triangle mirrored),
    1 more than the rest of its row: still on the fuzzer's grid of sixteenths."""
    m = np.array(values, np.float64).reshape(shape)
    if symmetric:
        m = np.tril(m) + np.swapaxes(np.tril(m, -1), -1, -2)
    n = shape[-1]
    eye = np.eye(n, dtype=bool)
    rest = np.sum(np.abs(np.where(eye, 0.0, m)), axis=-1)
    sign = np.where(np.diagonal(m, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
    diag = (1.0 if symmetric else sign) * (rest + 2 * DOMINANCE)
    m = np.where(eye, diag[..., None], m)
    return tuple(float(v) for v in m.reshape(-1))


def kink_distance(node: Node, args: list[np.ndarray]) -> np.ndarray:
    """How far each argument element is from the op's kink (0: at it), in the values' units."""
    op = node.op
    assert op is not None and op.kink is not None
    x = args[0].astype(np.float64)
    if op.kink == "zero":  # relu, abs
        return np.abs(x)
    if op.kink == "bound":  # clip at lo and hi
        return np.minimum(np.abs(x - node.attrs["lo"]), np.abs(x - node.attrs["hi"]))
    if op.kink == "base":  # pow's exponent, where the base is <= 0 (kept out by the domain)
        return np.maximum(x, 0.0)
    if op.kink == "window":  # a max-pool: ties within a window
        return window_distance(x, rank=x.ndim - 2, **node.attrs)
    if len(args) == 2:  # maximum, minimum: a tie between the arguments
        return np.abs(x - args[1].astype(np.float64))
    # max, min over `axis`: an element tied with the extremum, or close behind it
    axis = node.attrs.get("axis")
    best = op.forward(x, **{**node.attrs, "keepdims": True})
    behind = np.abs(x - best)
    winners = behind == 0
    np_axis = normalize_axes(axis, x.ndim)
    tied = winners & (winners.sum(axis=np_axis, keepdims=True) > 1)
    return np.where(winners & ~tied, np.inf, behind)
