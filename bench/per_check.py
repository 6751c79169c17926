"""One small check, warm, against the peers' own checkers on the same functions.

1. **PyTorch**: gradcheck with the stock torch adapter (`Checker` kept between checks,
   the engine in this process, TensorFlow's reference, no cache, the stale-gradients
   check and the diagnosis step as a plain ``gradcheck run`` has them) vs
   ``torch.autograd.gradcheck(fast_mode=True)`` on the same expression built from the
   same PyTorch ops. Target (issue 24): within 1.5x. The breakdown times gradcheck's
   parts alone: the engine's run (the stock adapter's driver, asked twice), the
   TensorFlow reference, and the rest (verdict, result, diagnosis of a passing case).
   Warm means past the reference's tracing too: a case structure checked `TRACE_AFTER`
   times has its TensorFlow reference traced (`references.traced`), and each
   expression here is checked that often (gradcheck and the tf column together)
   before the timing starts; the tf_eager column is the same reference computed eagerly,
   op by op, in the same turns.
2. **JAX**: the stock JAX adapter vs ``jax.test_util.check_grads(order=1,
   modes=["rev"])``, both warm (each function run once before timing): gradcheck reuses
   the compiled pullback across checks of one expression (`engines.functional`).
   Target: within 2x.

Each case is loaded once, as a run loads its file; every check draws its inputs anew
(`Checker.check` releases them), as each case of a run does. Sides are taken in turn
(interleaved) within each repeat; medians over repeats. PyTorch runs single-threaded
(tiny tensors gain nothing from its pool, and a descheduled thread on a busy 2-core
machine costs milliseconds).

    python bench/per_check.py [--repeats N] [--profile] [--no-jax]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from gradcheck.cases.loader import load_case
from gradcheck.cases.model import Case
from gradcheck.engines.checks import run_check
from gradcheck.engines.reverse import run_engine
from gradcheck.references.computed import computed_reference
from gradcheck.references.tensorflow import TensorFlowEngine, load_tensorflow
from gradcheck.references.traced import TRACE_AFTER
from gradcheck.runner import Checker, RunOptions

TORCH_TARGET, JAX_TARGET = 1.5, 2.0
OPTIONS = RunOptions(isolate="none")  # a plain run's defaults, the engine here

# Small functions, float64 (torch's gradcheck wants it), inputs of a few to 64 elements.
EXPRESSIONS = {
    "tanh_mul": ("tanh(x) * y", {"x": [3, 4], "y": [3, 4]}),
    "matmul_sum": ("sum(x @ y, axis=1)", {"x": [4, 5], "y": [5, 3]}),
    "logsumexp": ("logsumexp(x * 2.0 + y, axis=0)", {"x": [8, 8], "y": [8]}),
    "mlp": ("sigmoid(relu(x @ w1) @ w2)", {"x": [4, 6], "w1": [6, 8], "w2": [8, 2]}),
    "exp_log": ("log(exp(x) + 1.0) - x", {"x": [16]}),
}


def new_case(name: str) -> Case:
    expr, shapes = EXPRESSIONS[name]
    spec = {"init": "uniform", "low": 0.1, "high": 1.0}
    inputs = {n: {"shape": s, **spec} for n, s in shapes.items()}
    case = load_case({"name": name, "expr": expr, "dtype": "float64", "inputs": inputs})
    assert isinstance(case, Case), case
    return case


def as_function(engine, case: Case, constant: Callable) -> Callable:
    """The case's expression as a function of its inputs, in the engine's own op methods."""

    def fn(*values):
        built = dict(zip(case.wrt, values, strict=True))
        for node in case.expression.nodes:
            if node.is_literal:
                built[node.name] = constant(np.asarray(node.literal, np.float64))
            elif not node.is_input:
                args = [built[a.name] for a in node.args]
                method = getattr(engine, node.op.name)
                built[node.name] = (
                    method(args, **node.attrs) if node.op.variadic else method(*args, **node.attrs)
                )
        return built[case.expression.output.name]

    return fn


def interleaved(sides: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The median time of each side, the sides taken in turn within each repeat."""
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(repeats):
        for key, fn in sides.items():
            started = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - started)
    return {k: statistics.median(v) for k, v in times.items()}


def torch_sides(name: str, checker: Checker) -> dict[str, Callable[[], object]]:
    import torch

    from gradcheck.engines.stock.torch import TorchEngine

    case = new_case(name)
    engine = TorchEngine()
    fn = as_function(engine, case, engine.constant)
    arrays = [case.inputs[n].copy() for n in case.wrt]

    def theirs():
        leaves = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
        assert torch.autograd.gradcheck(fn, leaves, fast_mode=True)

    def ours():
        result = checker.check(case)  # which releases its inputs: the next check draws anew
        assert result.status == "passed", result.message

    def engine_only():
        run_engine(TorchEngine(), case.expression, case.inputs, case.wrt, case.cotangent,
                   ask_twice=True)  # fmt: skip
        case.release()

    def reference_only():
        computed_reference(case, "tensorflow")
        case.release()

    def eager_reference():  # what `reference_only` costs when it is not traced
        run_check(TensorFlowEngine(), case, "vjp")
        case.release()

    return {"torch": theirs, "gradcheck": ours, "engine": engine_only, "tf": reference_only,
            "tf_eager": eager_reference}  # fmt: skip


def jax_sides(name: str, checker: Checker) -> dict[str, Callable[[], object]]:
    import jax.numpy as jnp
    from jax.test_util import check_grads

    from gradcheck.engines.stock.jax import JaxEngine

    case = new_case(name)
    fn = as_function(JaxEngine(), case, jnp.asarray)
    arrays = [case.inputs[n].copy() for n in case.wrt]

    def theirs():
        with contextlib.suppress(AssertionError):  # a kink: the cost is what is measured
            check_grads(fn, arrays, order=1, modes=["rev"])

    def ours():
        result = checker.check(case)
        assert result.status == "passed", result.message

    def engine_only():
        run_engine(JaxEngine(), case.expression, case.inputs, case.wrt, case.cotangent,
                   ask_twice=True)  # fmt: skip
        case.release()

    return {"check_grads": theirs, "gradcheck": ours, "engine": engine_only}


def report(label: str, rows: dict[str, dict[str, float]], base: str, target: float) -> None:
    print(f"{label}: median ms per check (gradcheck / {base})")
    ratios = []
    for name, t in rows.items():
        ratio = t["gradcheck"] / t[base]
        ratios.append(ratio)
        parts = "  ".join(f"{k} {v * 1e3:6.2f}" for k, v in t.items())
        print(f"  {name:<11} {parts}   {ratio:.2f}x")
    total = sum(t["gradcheck"] for t in rows.values()) / sum(t[base] for t in rows.values())
    verdict = "met" if total <= target else "MISSED"
    print(
        f"  total {total:.2f}x, median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x"
        f"  (target <= {target}x: {verdict})"
    )


def profile(checker: Checker, name: str, n: int = 200) -> None:
    profiler = cProfile.Profile()
    case = new_case(name)
    profiler.runcall(lambda: [checker.check(case) for _ in range(n)])
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
    print(f"-- cProfile of {n} checks of {name}, by cumulative time")
    print(out.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--profile", action="store_true", help="cProfile the torch checks")
    parser.add_argument("--no-jax", action="store_true", help="leave out the JAX comparison")
    args = parser.parse_args()

    import torch

    from gradcheck.engines.stock.torch import TorchEngine

    torch.set_num_threads(1)
    load_tensorflow()
    with Checker(TorchEngine, OPTIONS) as checker:
        sides = {name: torch_sides(name, checker) for name in EXPRESSIONS}
        for fns in sides.values():  # warm: past the TensorFlow reference's tracing
            interleaved(fns, TRACE_AFTER // 2 + 1)
        if args.profile:
            profile(checker, "mlp")
        rows = {name: interleaved(fns, args.repeats) for name, fns in sides.items()}
    report("PyTorch, stock adapter vs torch.autograd.gradcheck(fast_mode=True)", rows, "torch",
           TORCH_TARGET)  # fmt: skip
    if not args.no_jax:
        from gradcheck.engines.stock.jax import JaxEngine

        with Checker(JaxEngine, OPTIONS) as checker:
            sides = {name: jax_sides(name, checker) for name in EXPRESSIONS}
            for fns in sides.values():
                interleaved(fns, 2)
            rows = {name: interleaved(fns, args.repeats) for name, fns in sides.items()}
        report("JAX, stock adapter vs check_grads(order=1, modes=['rev'])", rows, "check_grads",
               JAX_TARGET)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
