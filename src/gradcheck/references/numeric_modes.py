"""The numeric reference (SPEC §8) in forward mode and at second order.

Forward mode: the JVP along an input's tangent ``t`` is the derivative of the output along
``t``: central differences of the registry's NumPy forward in float64, extrapolated as in
`references.numeric`, ``R = (4 D(h) - D(2h)) / 3`` with ``D(h) = (f(x + h t) - f(x - h t)) /
2h``, ``h = STEP * max(rms(x), 1) / rms(t)``, each evaluation recomputing only the nodes
downstream of the input. Second order: central differences, the same way, of the
registry's first-order gradient (the builtin engine's, in float64) along every input's
direction ``v`` at once, as `torch.autograd.gradgradcheck` differentiates the analytical
first derivative: ``d/dh grad(x + h v)`` is the Hessian-vector product.

Each element's error bound is ``E = |D(h) - D(2h)| / 3 + 2 * noise / h``, with ``noise =
2 * (n + 1) * EPS * |value|`` the rounding of the differenced value (``n`` ops on the way);
an element is judged with its tolerance widened by the largest E of its input. Where the
one-sided slopes disagree (``J = 2 c(h) - c(2h)``, as in `references.numeric`: a kink or a
tie within 2h) an element is not judged, nor where E stays above its tolerance after a
retry with a step 16 times smaller, nor where a difference is not finite; the notes say
how many and why (`EngineRun.untrusted`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..cases.dtypes import widened
from ..cases.model import Case, Tolerance
from ..engines.builtin.engine import BuiltinEngine
from ..engines.driver import EngineFailure, EngineRun, Unsupported
from ..engines.reverse import run_engine
from .numeric import EPS, RETRY_SHRINK, STEP, _case_dtype_forward, _Program

Change = Callable[[float], dict[str, np.ndarray]]  # step h -> value(x + h d) - value(x), by name


def numeric_jvp(case: Case) -> EngineRun:
    """The finite-difference JVP along each input's tangent (`Case.tangents`)."""
    program = _Program(case.expression, case.inputs, case.cotangent)
    run = EngineRun(_forward(case, program), {})
    for name, tangent in case.tangents().items():
        node = case.expression.inputs[name]
        order = program.downstream(node)
        x, t = program.base[node], np.asarray(tangent, np.float64)
        h = STEP * max(_rms(x), 1.0) / max(_rms(t), EPS)

        def change(
            step: float, name=name, node=node, order=order, x=x, t=t
        ) -> dict[str, np.ndarray]:
            moved = program.change(node, x + step * t, order) if order else np.zeros(())
            return {name: np.broadcast_to(moved, program.base[case.expression.output].shape)}

        base = {name: program.base[case.expression.output]}
        _judge(run, change, base, h, len(order), case.tolerance, case.cotangent.dtype, "JVP")
    return run


def numeric_hvp(case: Case) -> EngineRun:
    """Finite differences of the registry's gradient along the directions (`Case.directions`)."""
    names = case.wrt_inputs
    inputs = {n: widened(v) for n, v in case.inputs.items()}
    cotangent = np.asarray(case.cotangent, np.float64)
    directions = {n: np.asarray(v, np.float64) for n, v in case.directions().items()}

    def gradient(step: float) -> dict[str, np.ndarray]:
        moved = {n: v + step * directions[n] if n in directions else v for n, v in inputs.items()}
        try:
            return run_engine(BuiltinEngine(), case.expression, moved, names, cotangent).grads
        except Unsupported as e:
            raise EngineFailure(
                f"the numeric reference at second order differentiates the registry's "
                f"NumPy VJPs, and an op has none: {e}"
            ) from None

    base = gradient(0.0)
    program = _Program(case.expression, case.inputs, case.cotangent)
    run = EngineRun(_forward(case, program), {})
    scale = np.sqrt(np.mean(np.concatenate([inputs[n].ravel() ** 2 for n in names])))
    along = np.sqrt(np.mean(np.concatenate([directions[n].ravel() ** 2 for n in names])))
    h = STEP * max(float(scale), 1.0) / max(float(along), EPS)

    def change(step: float) -> dict[str, np.ndarray]:
        moved = gradient(step)
        return {n: moved[n] - base[n] for n in names}

    ops = len(case.expression.op_nodes)
    _judge(run, change, base, h, 2 * ops, case.tolerance, case.cotangent.dtype, "second order")
    return run


def _forward(case: Case, program: _Program) -> np.ndarray:
    if case.cotangent.dtype == np.float64:
        return program.base[case.expression.output].copy()
    return _case_dtype_forward(case.expression, case.inputs, case.cotangent.dtype)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if x.size else 0.0


def _judge(
    run: EngineRun,
    change: Change,
    base: dict[str, np.ndarray],
    h: float,
    ops: int,
    tolerance: Tolerance,
    dtype: np.dtype,
    what: str,
) -> None:
    """Fill `run` with the derivative of `change` at 0, for each name, and what it cannot judge."""
    with np.errstate(all="ignore"):
        first = _stencil(change, h)
        retry = _stencil(change, h / RETRY_SHRINK)
        for name, (value, truncation, jump, level) in first.items():
            noise = 2 * (ops + 1) * EPS * (np.abs(base[name]) + level)
            bound = truncation + 2 * noise / h
            tol = tolerance.atol + tolerance.rtol * np.abs(value)
            again = retry[name]
            noise2 = 2 * (ops + 1) * EPS * (np.abs(base[name]) + again[3])
            bound2 = again[1] + 2 * RETRY_SHRINK * noise2 / h
            better = (bound > tol) & (bound2 < bound)
            value = np.where(better, again[0], value)
            bound = np.where(better, bound2, bound)
            jumps = np.where(better, np.abs(again[2]), np.abs(jump))
            kinks = jumps > np.maximum(tol, 10 * noise / h)
            finite = np.isfinite(value) & np.isfinite(bound)
            unresolved = finite & ~kinks & (bound > tol)
            untrusted = ~finite | kinks | unresolved
            run.grads[name] = np.where(finite, value, 0.0).astype(dtype)
            run.untrusted[name] = untrusted
            judged = bound[~untrusted]
            run.slack[name] = float(judged.max(initial=0.0))
            for count, why in (
                (int(kinks.sum()), "a kink or tie within a step (the one-sided slopes differ)"),
                (int(unresolved.sum()), "finite differences cannot resolve it to the tolerance"),
                (int((~finite).sum()), "overflow or a non-finite value within a step"),
            ):
                if count:
                    run.notes.append(
                        f"numeric reference, {what} of {name}: {count} element(s) not judged: {why}"
                    )


def _stencil(
    change: Change, h: float
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per name: the extrapolated derivative, its truncation bound, the kink indicator J
    and the size of the values differenced (for their rounding)."""
    plus, minus, plus2, minus2 = (change(step) for step in (h, -h, 2 * h, -2 * h))
    out = {}
    for name in plus:
        p, m, p2, m2 = plus[name], minus[name], plus2[name], minus2[name]
        d1, d2 = (p - m) / (2 * h), (p2 - m2) / (4 * h)
        jump = 2 * (p + m) / h - (p2 + m2) / (2 * h)
        level = np.maximum.reduce([np.abs(p), np.abs(m), np.abs(p2), np.abs(m2)])
        out[name] = ((4 * d1 - d2) / 3, np.abs(d1 - d2) / 3, jump, level)
    return out
