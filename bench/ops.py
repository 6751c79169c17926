"""The builtin engine's heavy ops against TensorFlow's, and a conv check against torch's.

1. **Forward + VJP**: one ``run_engine`` of the builtin engine (forward, then the VJP in
   every differentiable input) against the same ops under a ``tf.GradientTape`` in
   TensorFlow, eager, on the same arrays and cotangent, float64: ``conv2d`` (8 images of
   32x32x16, a 3x3 filter to 32 channels, SAME; target within 3x), ``max_pool2d`` (3x3
   windows every 2, SAME) and ``take`` (5000 repeated rows of a 1000x64 table; the
   gradient a scatter-add), these two without a target, for scale. The builtin_1t
   column is the builtin engine with BLAS on one thread: im2col contracts a few
   examples at a time, many small products, which a BLAS pool contended on a shared
   machine makes slower, not faster.
2. **A whole check**: ``Checker.check`` of the conv2d case above (the stock torch adapter, in
   this process, TensorFlow's reference, the stale-gradients check and the diagnosis
   step as a plain ``gradcheck run`` has them; warm past the reference's tracing) against
   ``torch.autograd.gradcheck(fast_mode=True)`` of the same function from the same
   PyTorch ops. Target: within 2x.
3. **im2col memory**: tracemalloc's peak while the builtin conv2d's forward and each of
   its VJPs run (8 images of 32x32x16, a 5x5 filter to 16 channels, SAME: the whole
   batch's windows would be 12x the arrays), over the bytes of its input, filter and
   output (the expansion is made
   a few examples at a time, so a whole batch's windows never exist at once). Target:
   <= 4x.

Sides are taken in turn (interleaved) within each repeat; medians over repeats; every
ratio is against a baseline measured in this process, never a timed assertion.

    python bench/ops.py [--repeats N]
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from collections.abc import Callable

import numpy as np
from per_check import interleaved  # bench/ is the script's folder: its sibling
from threadpoolctl import threadpool_limits

from gradcheck.cases.loader import load_case
from gradcheck.cases.model import Case
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.reverse import run_engine
from gradcheck.ops import get_op
from gradcheck.references.tensorflow import load_tensorflow
from gradcheck.references.traced import TRACE_AFTER
from gradcheck.runner import Checker, RunOptions

CONV_TARGET, CHECK_TARGET, MEMORY_TARGET = 3.0, 2.0, 4.0
OPTIONS = RunOptions(isolate="none")

# name: (expression, inputs, the same in TensorFlow, target or None)
OPS = {
    "conv2d": (
        "conv2d(x, w, padding='SAME')",
        {"x": {"shape": [8, 32, 32, 16]}, "w": {"shape": [3, 3, 16, 32]}},
        lambda tf, v: tf.nn.conv2d(v["x"], v["w"], 1, "SAME"),
        CONV_TARGET,
    ),
    "max_pool2d": (
        "max_pool2d(x, ksize=3, strides=2, padding='SAME')",
        {"x": {"shape": [8, 32, 32, 16]}},
        lambda tf, v: tf.nn.max_pool2d(v["x"], 3, 2, "SAME"),
        None,
    ),
    "take": (
        "take(x, i, axis=0)",
        {"x": {"shape": [1000, 64]},
         "i": {"shape": [5000], "init": "integers", "low": 0, "high": 999, "dtype": "int64"}},
        lambda tf, v: tf.gather(v["x"], v["i"], axis=0),
        None,
    ),
}  # fmt: skip

CHECKED = ("conv2d(x, w, padding='SAME')", {"x": [8, 32, 32, 16], "w": [3, 3, 16, 32]})


def new_case(name: str, expr: str, inputs: dict) -> Case:
    case = load_case({"name": name, "expr": expr, "dtype": "float64", "inputs": inputs})
    assert isinstance(case, Case), case
    return case


def op_sides(name: str) -> dict[str, Callable[[], object]]:
    tf = load_tensorflow()
    expr, inputs, tf_forward, _ = OPS[name]
    case = new_case(name, expr, inputs)
    arrays = {n: np.array(a) for n, a in case.inputs.items()}
    cotangent = np.array(case.cotangent)

    def ours():
        run_engine(BuiltinEngine(), case.expression, arrays, case.wrt, cotangent)

    def ours_one_thread():  # BLAS on one thread: im2col's many small products
        with threadpool_limits(1, user_api="blas"):
            ours()

    def theirs():
        values = {n: tf.constant(a) for n, a in arrays.items()}
        with tf.GradientTape() as tape:
            for n in case.wrt:
                tape.watch(values[n])
            y = tf_forward(tf, values)
        grads = tape.gradient(y, [values[n] for n in case.wrt], tf.constant(cotangent))
        return [np.asarray(g) for g in grads], np.asarray(y)

    return {"builtin": ours, "builtin_1t": ours_one_thread, "tensorflow": theirs}


def check_sides(checker: Checker) -> dict[str, Callable[[], object]]:
    import torch

    from gradcheck.engines.stock.torch import TorchEngine

    expr, shapes = CHECKED
    case = new_case("conv_check", expr, {n: {"shape": s} for n, s in shapes.items()})
    engine, conv = TorchEngine(), get_op("conv2d")
    attrs = {**conv.attrs, "padding": "SAME"}
    arrays = [np.array(case.inputs[n]) for n in case.wrt]

    def theirs():
        leaves = [torch.from_numpy(a.copy()).requires_grad_() for a in arrays]
        assert torch.autograd.gradcheck(lambda x, w: engine.conv2d(x, w, **attrs), leaves,
                                        fast_mode=True)  # fmt: skip

    def ours():
        result = checker.check(case)  # which releases its inputs: the next check draws anew
        assert result.status == "passed", result.message

    return {"torch": theirs, "gradcheck": ours}


def row(label: str, t: dict[str, float], base: str, target: float | None) -> None:
    """The times, then each other side's ratio to `base` (the first against the target)."""
    parts = "  ".join(f"{k} {v * 1e3:7.2f}" for k, v in t.items())
    ratios = [(k, t[k] / t[base]) for k in t if k != base]
    shown = "  ".join(f"{k} {r:.2f}x" for k, r in ratios)
    mark = ""
    if target is not None:
        mark = f"  (target <= {target}x: {'met' if ratios[0][1] <= target else 'MISSED'})"
    print(f"  {label:<11} {parts}   {shown}{mark}")


def peak_ratio(fn: Callable[[], object], size: int) -> float:
    """tracemalloc's peak above what was traced before `fn`, over `size` bytes."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return (tracemalloc.get_traced_memory()[1] - before) / size
    finally:
        tracemalloc.stop()


def memory() -> None:
    op = get_op("conv2d")
    attrs = {**op.attrs, "padding": "SAME"}
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 32, 32, 16)), rng.standard_normal((5, 5, 16, 16))
    y = op.forward(x, w, **attrs)
    g = rng.standard_normal(y.shape)
    size = x.nbytes + w.nbytes + y.nbytes
    whole = 8 * 32 * 32 * 5 * 5 * 16 * 8  # the whole batch's windows, float64
    print(f"im2col peak memory over x + w + y ({size / 1e6:.1f} MB; the whole expansion "
          f"would be {whole / size:.1f}x)")  # fmt: skip
    for label, fn in (
        ("forward", lambda: op.forward(x, w, **attrs)),
        ("vjp x", lambda: op.vjps[0](g, y, x, w, **attrs)),
        ("vjp w", lambda: op.vjps[1](g, y, x, w, **attrs)),
    ):
        ratio = peak_ratio(fn, size)
        verdict = "met" if ratio <= MEMORY_TARGET else "MISSED"
        print(f"  {label:<11} {ratio:.2f}x  (target <= {MEMORY_TARGET}x: {verdict})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()

    import torch

    from gradcheck.engines.stock.torch import TorchEngine

    torch.set_num_threads(1)
    load_tensorflow()
    print("forward + VJP: median ms (builtin, builtin_1t / tensorflow)")
    for name in OPS:
        sides = op_sides(name)
        interleaved(sides, 2)  # warm
        row(name, interleaved(sides, args.repeats), "tensorflow", OPS[name][3])
    print("a conv2d check: median ms (gradcheck / torch.autograd.gradcheck(fast_mode=True))")
    with Checker(TorchEngine, OPTIONS) as checker:
        sides = check_sides(checker)
        interleaved(sides, TRACE_AFTER + 1)  # warm: past the TensorFlow reference's tracing
        row("conv2d", interleaved(sides, args.repeats), "torch", CHECK_TARGET)
    memory()
    return 0


if __name__ == "__main__":
    sys.exit(main())
