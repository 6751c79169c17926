"""The numeric reference (SPEC §8): central finite differences of the registry's NumPy forward.

It never imports TensorFlow. The function differentiated is ``F = sum(output * cotangent)``
in float64, the output computed by each op's NumPy `forward` (the same table the builtin
engine and TensorFlow's builders come from). The forward value it reports is that forward
in the case's dtype, as the builtin engine computes it.

**Symmetric arguments.** An op that reads an argument as a symmetric matrix
(`Op.symmetric`: cholesky) gets ``(x + x^T) / 2``, so that a step in one element moves
its mirror too: the finite differences are TensorFlow's symmetrised gradient.

**Which derivatives.** An input (or `wrt` binding) of up to `FULL_LIMIT` elements gets
its whole gradient, one element at a time. A larger one is checked the way fast gradient
checkers do, along `DIRECTIONS` random unit directions ``u``: the registry's own VJPs give
the gradient, and it is the reference only if ``grad . u`` agrees with the finite-difference
directional derivative along every direction; if some op on the way has no NumPy VJPs,
the whole gradient is computed element by element up to `MAX_EVALUATIONS`.

**The rule.** Element ``x_i`` moves by ``h = EPS ** (1/3) * max(|x_i|, 1)`` (about 6e-6 at
unit scale: the step that balances truncation against rounding for central differences),
along a direction by ``h = EPS ** (1/3) * max(rms(x), 1)``. With ``D(h) = (F(x+h) -
F(x-h)) / 2h`` the reference is the Richardson extrapolation ``R = (4 D(h) - D(2h)) / 3``
(error O(h^4)), four evaluations per element (and one with NaN in its place, which shows
the terms it reaches), each recomputing only the nodes downstream of what moved. Its
error bound is

    E = |D(h) - D(2h)| / 3  +  2 * noise / h,    noise = 2 * (n + 1) * EPS * S,

where ``S = sum(|output * cotangent|)`` over the output elements the element reaches (those
that turn NaN when it is NaN) is the function's scale there, and ``n`` the number of op
nodes downstream of the input: the first term bounds the truncation error of D(h) (R's is
smaller), the second the rounding of F's terms (half an ulp per op, twice over), counted
even where it swallows a step whole. An
element is judged with its input's tolerance widened by the largest E of the input (never
more than the case's own tolerance: see below), so a finite-difference error cannot fail
a correct engine.

**Where it cannot judge.** The one-sided slopes at h and 2h tell a kink from curvature:
``J = 2 c(h) - c(2h)`` with ``c(h) = (F(x+h) - 2 F(x) + F(x-h)) / h`` is O(h^3) where F is
smooth and equals the jump of the derivative at a kink or tie sitting at ``x_i``. Where
|J| exceeds the tolerance, the element sits at a kink: the reference there is the
subgradient TensorFlow's convention gives (the registry's VJPs follow it), noted as such,
or, for an op without NumPy VJPs, the element is not judged. An element whose bound E
stays above its tolerance after a retry with a step 16 times smaller (a kink nearby, or
rounding that swamps the derivative), whose differences overflow, or any element of a
case whose forward value is not finite, is not judged either, and the report says which
and why (`EngineRun.untrusted`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..cases.dtypes import widened
from ..cases.model import Case, Tolerance
from ..engines.builtin.engine import BuiltinEngine
from ..engines.driver import EngineRun, Unsupported, build_expression
from ..engines.reverse import run_engine
from ..expression import Expression, Node

EPS = float(np.finfo(np.float64).eps)
STEP = EPS ** (1 / 3)
RETRY_SHRINK = 16.0
FULL_LIMIT = 256  # elements: up to this many, the whole gradient by finite differences
DIRECTIONS = 4  # random directions checked for a larger input
MAX_EVALUATIONS = 65_536  # forward evaluations for one input without NumPy VJPs
LABEL = "numeric (central differences, float64)"


def numeric_run(
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    wrt: Sequence[str],
    cotangent: np.ndarray,
    tolerance: Tolerance,
    seed: int = 0,
) -> EngineRun:
    """The forward value and, for each name in `wrt`, the finite-difference gradient."""
    program = _Program(expression, inputs, cotangent)
    if cotangent.dtype == np.float64:  # the float64 forward is the case's own
        forward = program.base[expression.output].copy()
    else:
        forward = _case_dtype_forward(expression, inputs, cotangent.dtype)
    run = EngineRun(forward, {})
    if not program.finite:
        for name in wrt:
            shape = expression.lookup(name).shape
            run.grads[name] = np.zeros(shape, cotangent.dtype)
            run.untrusted[name] = np.ones(shape, bool)
        run.notes.append(
            "numeric reference: the forward value is not finite (inf or nan in the output), "
            "so finite differences cannot judge any gradient here; not judged"
        )
        return run
    rng = np.random.default_rng([seed, 0xF1D])
    for name in wrt:
        gradient = _Gradient(program, expression.lookup(name), tolerance, inputs, rng)
        run.grads[name] = gradient.value.astype(cotangent.dtype)
        run.untrusted[name] = gradient.untrusted
        run.slack[name] = gradient.slack
        run.notes += [f"numeric reference, {name}: {note}" for note in gradient.notes]
    return run


def numeric_reference(case: Case) -> EngineRun:
    """The numeric reference of a loaded case."""
    return numeric_run(
        case.expression, case.inputs, case.wrt, case.cotangent, case.tolerance, case.seed
    )


def _case_dtype_forward(
    expression: Expression, inputs: Mapping[str, np.ndarray], dtype: np.dtype
) -> np.ndarray:
    engine = BuiltinEngine()
    built = build_expression(engine, expression, inputs, set(), dtype)
    return np.asarray(engine.value(built[expression.output]))


class _Program:
    """The expression in float64 at its base point; re-evaluated with one node moved."""

    def __init__(
        self, expression: Expression, inputs: Mapping[str, np.ndarray], cotangent: np.ndarray
    ) -> None:
        self.expression = expression
        self.cotangent = np.asarray(cotangent, np.float64)
        self.base: dict[Node, np.ndarray] = {}
        with np.errstate(all="ignore"):
            for node in expression.nodes:
                if node.is_input:
                    self.base[node] = widened(inputs[node.name])
                elif node.is_literal:
                    self.base[node] = np.asarray(node.literal, np.float64)
                else:
                    self.base[node] = self._apply(node, self.base)
        out = self.base[expression.output]
        terms = out * self.cotangent
        self.finite = bool(np.isfinite(terms[self.cotangent != 0]).all())
        self.terms = np.abs(terms)

    def _apply(self, node: Node, values: Mapping[Node, Any]) -> Any:
        if node.is_part:  # one output of an op with several
            return values[node.args[0]][node.part]
        op = node.op
        assert op is not None
        args = [values[a] for a in node.args]
        for param in op.symmetric:  # read as symmetric (cholesky): perturbed symmetrically
            k = op.params.index(param)
            args[k] = (args[k] + np.swapaxes(args[k], -1, -2)) / 2
        out = op.forward(args, **node.attrs) if op.variadic else op.forward(*args, **node.attrs)
        if op.multi:
            return tuple(np.asarray(o, np.float64) for o in out)
        return np.asarray(out, np.float64)

    def downstream(self, moved: Node) -> list[Node]:
        """The op nodes whose value depends on `moved`, in evaluation order."""
        affected = {id(moved)}
        order = []
        for node in self.expression.nodes:
            computed = node.op is not None or node.is_part
            if computed and any(id(a) in affected for a in node.args):
                affected.add(id(node))
                order.append(node)
        return order

    def change(self, moved: Node, value: np.ndarray, order: Sequence[Node]) -> np.ndarray:
        """``output(moved = value) - output(base)``: F's terms change by this times the
        cotangent (summing the changes, not differencing F, keeps F's own size out)."""
        values = {**self.base, moved: value}
        for node in order:
            values[node] = self._apply(node, values)
        return values[self.expression.output] - self.base[self.expression.output]


class Estimate(NamedTuple):
    """One finite-difference derivative: its value, error bound, kink indicator J (see the
    module's docstring), and the size J reaches from rounding alone."""

    value: float
    bound: float
    jump: float
    jump_noise: float


class _Gradient:
    """One `wrt` node's reference gradient, which elements it cannot judge, and why."""

    def __init__(
        self,
        program: _Program,
        node: Node,
        tolerance: Tolerance,
        inputs: Mapping[str, np.ndarray],
        rng: np.random.Generator,
    ) -> None:
        self.program, self.node, self.tolerance = program, node, tolerance
        self.inputs = inputs
        self.notes: list[str] = []
        self.x = program.base[node]
        self.order = program.downstream(node)
        self.value = np.zeros(self.x.shape)
        self.untrusted = np.zeros(self.x.shape, bool)
        self.slack = 0.0
        self.rounding = 2 * (len(self.order) + 1) * EPS  # relative, per term of F
        self._analytic: np.ndarray | bool | None = False  # False: not computed yet
        if program.expression.output is not node and not self.order:
            return  # the output does not depend on this node: its gradient is zero
        with np.errstate(all="ignore"):
            if self.x.size <= FULL_LIMIT:
                self._elementwise()
            else:
                self._directional(rng)

    # -- the whole gradient ------------------------------------------------------------
    def _elementwise(self) -> None:
        flat = self.x.reshape(-1)
        kinks, unresolved, overflow = [], [], []
        bounds = np.zeros(flat.size)
        for i in range(flat.size):
            h = STEP * max(abs(flat[i]), 1.0)
            estimate = self._element(i, h)
            if not self._resolved(estimate):  # a kink nearby may be out of a smaller step's reach
                estimate = self._element(i, h / RETRY_SHRINK)
            tol = self._tol(estimate.value)
            if not (np.isfinite(estimate.value) and np.isfinite(estimate.bound)):
                overflow.append(i)
            elif abs(estimate.jump) > max(tol, estimate.jump_noise):
                kinks.append(i)
            elif estimate.bound > tol:
                unresolved.append(i)
            else:
                bounds[i] = estimate.bound
            self.value.flat[i] = estimate.value
        self.slack = float(bounds.max(initial=0.0))
        self._at_kinks(kinks)
        self._not_judged(overflow, "overflow or a non-finite value within a step")
        self._not_judged(
            unresolved,
            "finite differences cannot resolve the derivative to the case's tolerance "
            "(a kink or tie nearby, or rounding: the function's terms are large beside it)",
        )

    def _tol(self, value: float) -> float:
        return self.tolerance.atol + self.tolerance.rtol * abs(value)

    def _resolved(self, estimate: Estimate) -> bool:
        tol = self._tol(estimate.value)
        return bool(
            np.isfinite(estimate.value)
            and estimate.bound <= tol
            and abs(estimate.jump) <= max(tol, estimate.jump_noise)
        )

    def _element(self, i: int, h: float) -> Estimate:
        moved = self.x.copy()  # one buffer: each change is computed before the next step

        def step(by: float) -> np.ndarray:
            moved.flat[i] = self.x.flat[i] + by
            return moved

        return self._stencil(step, h)

    def _stencil(self, moved: Callable[[float], np.ndarray], h: float) -> Estimate:
        """The derivative along what `moved(step)` moves, from steps of ±h and ±2h."""
        program, cotangent = self.program, self.program.cotangent
        # The terms the step reaches are those NaN in its place turns NaN: rounding's share of
        # each counts, even where it swallows a step's change whole.
        reached = np.isnan(program.change(self.node, moved(np.nan), self.order))
        noise = self.rounding * float(program.terms[reached].sum())
        plus, minus, plus2, minus2 = (
            float(np.vdot(program.change(self.node, moved(step), self.order), cotangent))
            for step in (h, -h, 2 * h, -2 * h)
        )
        d1 = (plus - minus) / (2 * h)
        d2 = (plus2 - minus2) / (4 * h)
        jump = 2 * (plus + minus) / h - (plus2 + minus2) / (2 * h)
        return Estimate((4 * d1 - d2) / 3, abs(d1 - d2) / 3 + 2 * noise / h, jump, 10 * noise / h)

    # -- along random directions -------------------------------------------------------
    def _directional(self, rng: np.random.Generator) -> None:
        analytic = self._analytic_gradient()
        if analytic is None:
            if 4 * self.x.size <= MAX_EVALUATIONS:
                self._elementwise()
                return
            self.untrusted[...] = True
            self.notes.append(
                f"{self.x.size:,} elements are too many for finite differences element by "
                "element, and an op on the way has no NumPy VJPs to check along random "
                "directions; not judged"
            )
            return
        self.value = analytic
        h = STEP * max(float(np.sqrt(np.mean(self.x**2))), 1.0)
        tolerances = self.tolerance.atol + self.tolerance.rtol * np.abs(analytic)
        for _ in range(DIRECTIONS):
            u = rng.standard_normal(self.x.shape)
            u /= np.linalg.norm(u)
            estimate = self._stencil(lambda step, u=u: self.x + step * u, h)
            along = float(np.vdot(analytic, u))
            tol = float(np.vdot(np.abs(u), tolerances))
            if abs(estimate.jump) > max(tol, estimate.jump_noise):
                continue  # a kink along this direction: it can neither confirm nor refute
            if not (
                np.isfinite(estimate.value) and abs(along - estimate.value) <= tol + estimate.bound
            ):
                self.untrusted[...] = True
                self.notes.append(
                    f"the op registry's VJPs give {along:.6g} along a random direction where "
                    f"finite differences give {estimate.value:.6g} (error bound "
                    f"{estimate.bound:.2g}); with {self.x.size:,} elements, above the "
                    f"full-gradient limit of {FULL_LIMIT}, it is not judged"
                )
                return
            self.slack = max(self.slack, estimate.bound)
        self.notes.append(
            f"{self.x.size:,} elements: the op registry's VJPs, confirmed by finite "
            f"differences along {DIRECTIONS} random directions"
        )

    # -- what cannot be judged ---------------------------------------------------------
    def _analytic_gradient(self) -> np.ndarray | None:
        """The registry's VJPs (TensorFlow's conventions) at this point; None without them."""
        if self._analytic is False:
            self._analytic = _registry_gradient(self.program, self.node, self.inputs)
        return self._analytic  # type: ignore[return-value]

    def _at_kinks(self, indices: list[int]) -> None:
        if not indices:
            return
        analytic = self._analytic_gradient()
        where = _kink_ops(self.program.expression)
        if analytic is None:
            self._not_judged(indices, f"at a kink or tie{where}, of an op without NumPy VJPs")
            return
        self.value.flat[indices] = analytic.reshape(-1)[indices]
        self.notes.append(
            f"{len(indices)} element(s) sit at a kink or tie{where} (the one-sided slopes "
            "differ); there the reference is TensorFlow's subgradient convention, from the op "
            "registry's VJPs"
        )

    def _not_judged(self, indices: list[int], why: str) -> None:
        if indices:
            self.untrusted.flat[indices] = True
            self.notes.append(f"{len(indices)} element(s) not judged: {why}")


def _kink_ops(expression: Expression) -> str:
    names = sorted({n.op.name for n in expression.op_nodes if n.op and n.op.kink})
    return f" ({', '.join(names)})" if names else ""


def _registry_gradient(
    program: _Program, node: Node, inputs: Mapping[str, np.ndarray]
) -> np.ndarray | None:
    expression = program.expression
    values = {name: program.base[expression.inputs[name]] for name in inputs}
    name = node.name if node.is_input else _binding(expression, node)
    try:
        run = run_engine(BuiltinEngine(), expression, values, [name], program.cotangent)
    except Unsupported:
        return None
    return np.asarray(run.grads[name], np.float64)


def _binding(expression: Expression, node: Node) -> str:
    return next(name for name, bound in expression.bindings.items() if bound is node)
