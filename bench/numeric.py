"""What the numeric reference costs, against TensorFlow and against other gradient checkers.

1. **Cold, end to end**: ``gradcheck run cases/ -q --no-cache --reference numeric`` vs
   ``--reference tensorflow`` (TensorFlow's import included), each in a fresh interpreter,
   best of N. Target (issue 12): numeric at least 3x faster.
2. **Warm**, in this process (TensorFlow imported, nothing cached): the shipped suite
   through `runner.run` with each reference, best of N.
3. **Per case**, every shipped case in float64: gradcheck checking PyTorch's gradient by
   finite differences (`check_case`, the stock torch adapter, ``reference: numeric``, no
   diagnosis, reverse mode at first order, the engine asked for its gradients once as the
   other checkers ask: no stale-gradients check) vs ``torch.autograd.gradcheck(
   fast_mode=True)`` on the same expression built from the same PyTorch ops; and the
   numeric reference alone. Target: within 2x of
   torch's fast mode. Then the same with JAX against ``jax.test_util.check_grads(order=1,
   modes=["rev"])``, first call (JAX compiles) and again (its caches warm). PyTorch runs
   single-threaded here (see `torch_per_case`).

    python bench/numeric.py [--repeats N] [--no-jax]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gradcheck.cases import Case, load_paths
from gradcheck.cases.model import Tolerance
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.references.numeric import numeric_reference
from gradcheck.runner import RunOptions, check_case, run

ROOT = Path(__file__).resolve().parents[1]
COLD_TARGET, PER_CASE_TARGET = 3.0, 2.0


def cold(reference: str) -> float:
    script = Path(sys.executable).with_name("gradcheck")  # the console script beside python
    command = [str(script), "run", str(ROOT / "cases"), "-q"]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--no-cache", "--reference", reference], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"gradcheck --reference {reference} exited {done.returncode}:\n{done.stdout}")
    return elapsed


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def float64(case: Case) -> Case:
    """The case in float64, reverse mode at first order only: what the other checkers
    compared here check (forward mode and second order are bench/modes.py's)."""
    return dataclasses.replace(
        case.widened(),
        modes=("rev",),
        order=1,
        tolerance=Tolerance.for_dtype("float64"),
        wrt=[n for n in case.wrt if n in case.expression.inputs],
        reference="numeric",
    )


def as_function(engine, case: Case, constant: Callable) -> Callable:
    """The case's expression as a function of its `wrt` inputs, in the engine's own ops."""

    def fn(*values):
        given = dict(zip(case.wrt, values, strict=True))
        built = {}
        for node in case.expression.nodes:
            if node.is_input:
                built[node] = given.get(node.name, constant(case.inputs[node.name]))
            elif node.is_literal:
                built[node] = constant(np.asarray(node.literal, np.float64))
            else:
                args = [built[a] for a in node.args]
                method = getattr(engine, node.op.name)
                built[node] = (
                    method(args, **node.attrs) if node.op.variadic else method(*args, **node.attrs)
                )
        return built[case.expression.output]

    return fn


def ratio_line(what: str, ours: list[float], theirs: list[float], target: float | None) -> str:
    per_case = [a / b for a, b in zip(ours, theirs, strict=True)]
    total = sum(ours) / sum(theirs)
    verdict = ""
    if target is not None:
        verdict = f"  (target <= {target:.0f}x: {'met' if total <= target else 'MISSED'})"
    return (
        f"  {what}: total {sum(ours) * 1e3:.0f} ms vs {sum(theirs) * 1e3:.0f} ms = {total:.2f}x, "
        f"per case median {statistics.median(per_case):.2f}x, worst {max(per_case):.2f}x{verdict}"
    )


def torch_per_case(cases: list[Case], repeats: int) -> None:
    import torch

    from gradcheck.engines.stock.torch import TorchEngine

    # One thread on both sides: tiny tensors gain nothing from PyTorch's OpenMP pool, and on
    # a busy 2-core machine a parallel region waits milliseconds for a descheduled thread.
    torch.set_num_threads(1)
    ours, theirs, reference_only = [], [], []
    options = RunOptions(diagnose=False, reference="numeric", stale_check_limit=0)  # once
    for case in cases:
        engine = TorchEngine()
        fn = as_function(engine, case, engine.constant)
        leaves = [torch.from_numpy(case.inputs[n].copy()).requires_grad_() for n in case.wrt]

        def torch_fast(fn=fn, leaves=leaves):
            torch.autograd.gradcheck(fn, leaves, fast_mode=True, raise_exception=False)

        ours.append(best(lambda case=case: check_case(case, TorchEngine, options), repeats))
        theirs.append(best(torch_fast, repeats))
        reference_only.append(best(lambda case=case: numeric_reference(case), repeats))
    baseline = "torch.autograd.gradcheck(fast_mode=True)"
    print(f"per case, {len(cases)} shipped cases in float64, vs {baseline}:")
    print(ratio_line("gradcheck --engine torch --reference numeric", ours, theirs, PER_CASE_TARGET))
    print(ratio_line("the numeric reference alone", reference_only, theirs, None))


def jax_per_case(cases: list[Case]) -> None:
    import jax.numpy as jnp
    from jax.test_util import check_grads

    from gradcheck.engines.stock.jax import JaxEngine

    def checkers(case: Case):
        fn = as_function(JaxEngine(), case, jnp.asarray)
        args = [case.inputs[n] for n in case.wrt]

        def theirs():
            with contextlib.suppress(AssertionError):  # a tie or kink: the cost is measured
                check_grads(fn, args, order=1, modes=["rev"])

        options = RunOptions(diagnose=False, reference="numeric", stale_check_limit=0)  # once
        return (lambda: check_case(case, JaxEngine, options)), theirs

    pairs = [checkers(case) for case in cases]
    for label in ("first call", "again"):
        ours = [best(a, 1) for a, _ in pairs]
        theirs = [best(b, 1) for _, b in pairs]
        print(f"per case, JAX, {label}, vs jax.test_util.check_grads(order=1, modes=['rev']):")
        print(ratio_line("gradcheck --engine jax --reference numeric", ours, theirs, None))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-jax", action="store_true", help="leave out the JAX comparison")
    args = parser.parse_args()

    numeric = min(cold("numeric") for _ in range(args.repeats))
    tensorflow = min(cold("tensorflow") for _ in range(args.repeats))
    verdict = "met" if tensorflow / numeric >= COLD_TARGET else "MISSED"
    print(f"cold, end to end (fresh interpreter, no cache, best of {args.repeats}):")
    print(
        f"  --reference numeric {numeric:.2f}s, --reference tensorflow {tensorflow:.2f}s: "
        f"numeric {tensorflow / numeric:.1f}x faster (target >= {COLD_TARGET:.0f}x: {verdict})"
    )

    cases = [c for c in load_paths([ROOT / "cases"]) if isinstance(c, Case)]
    warm = {
        kind: best(
            lambda kind=kind: run(cases, BuiltinEngine, RunOptions(diagnose=False, reference=kind)),
            args.repeats,
        )
        for kind in ("tensorflow", "numeric")
    }
    print(f"warm, in process (TensorFlow imported, no cache, {len(cases)} cases):")
    print(
        f"  numeric {warm['numeric']:.2f}s, tensorflow {warm['tensorflow']:.2f}s: "
        f"numeric {warm['tensorflow'] / warm['numeric']:.2f}x faster"
    )

    wide = [float64(c) for c in cases]
    torch_per_case(wide, args.repeats)
    if not args.no_jax:
        jax_per_case(wide)
    return 0


if __name__ == "__main__":
    sys.exit(main())
