"""`gradcheck.torch.check` on whole ``nn.Module``s against PyTorch's own checker.

1. **Passing**: a 3-layer MLP (4 -> 32 -> 32 -> 3, 1,315 parameters) and a small CNN
   (conv 2->4 3x3, max-pool, linear to 5 classes, cross-entropy) checked with
   ``gradcheck.torch.check(module, x)`` (every parameter and the input, the reference
   TensorFlow and finite differences: "both") vs ``torch.autograd.gradcheck(...,
   fast_mode=True)`` on the same module, its parameters and input as the inputs (via
   ``torch.func.functional_call``), float64. Target (issue 26): within 3x. TensorFlow's
   one-off import is made before timing; each side is timed in turn, medians over repeats.
   Twice: as a test suite checks a module, once (TensorFlow's reference eager, op by op),
   and warm, a module checked again and again (after `TRACE_AFTER` checks the reference
   is one traced ``tf.function``, `references.traced`), as bench/per_check.py times.
   The breakdown times the trace alone (tracing, writing the program, the replay engine)
   and the same check with ``reference="both"`` (finite differences too).
2. **Diagnosis**: the MLP with a custom ``torch.autograd.Function`` whose backward forgot
   a square, checked and diagnosed (formula recovery included). Target: under 2 s.

    python bench/callables.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

import gradcheck.torch as gt
from gradcheck.references.traced import TRACE_AFTER
from gradcheck.tracing.torch_fn import trace

TARGET, DIAGNOSIS_TARGET = 3.0, 2.0


class MLP(nn.Module):
    def __init__(self, activation: Callable = torch.tanh) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(4, 32), nn.Linear(32, 32), nn.Linear(32, 3)
        self.activation = activation

    def forward(self, x):
        return self.fc3(self.activation(self.fc2(F.relu(self.fc1(x)))))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = nn.Conv2d(2, 4, 3, padding=1), nn.Linear(4 * 4 * 4, 5)

    def forward(self, x, labels):
        h = F.max_pool2d(F.relu(self.conv(x)), 2)
        return F.cross_entropy(self.fc(h.flatten(1)), labels)


class TanhNoSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y)


def torch_check(module: nn.Module, *args: torch.Tensor) -> bool:
    """torch.autograd.gradcheck's fast mode on the module's parameters and its float input."""
    names = [n for n, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in module.parameters()]
    x = args[0].detach().clone().requires_grad_(True)

    def fn(x, *values):
        named = dict(zip(names, values, strict=True))
        return torch.func.functional_call(module, named, (x, *args[1:]))

    return torch.autograd.gradcheck(fn, (x, *params), fast_mode=True)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    torch.set_num_threads(1)
    torch.manual_seed(0)
    mlp, cnn = MLP().double(), CNN().double()
    x = torch.randn(8, 4, dtype=torch.float64)
    image, labels = torch.randn(2, 2, 8, 8, dtype=torch.float64), torch.tensor([1, 3])
    subjects = {"mlp": (mlp, (x,)), "cnn": (cnn, (image, labels))}
    for module, args in subjects.values():  # warm: TensorFlow's import, first calls
        assert gt.check(module, *args).passed and torch_check(module, *args)
    worst = passing(subjects, repeats, "eager reference")
    for module, args in subjects.values():  # past the reference's tracing
        for _ in range(TRACE_AFTER):
            gt.check(module, *args)
    worst = max(worst, passing(subjects, repeats, "warm, traced reference"))
    print(f"worst {worst:.2f}x: {'met' if worst <= TARGET else 'MISSED'}")
    diagnosis(x, repeats)


def passing(subjects: dict, repeats: int, label: str) -> float:
    """The passing modules' table; the worst ratio."""
    print(f"1. passing modules, {label}, medians of {repeats} (target within {TARGET}x)")
    print(f"{'module':8}{'torch fast':>12}{'gradcheck':>12}{'ratio':>8}{'trace':>10}"
          f"{'both':>10}")  # fmt: skip
    worst = 0.0
    for name, (module, args) in subjects.items():
        sides = {
            "torch": lambda m=module, a=args: torch_check(m, *a),
            "ours": lambda m=module, a=args: gt.check(m, *a),
            "trace": lambda m=module, a=args: trace(m, a, {}),
            "both": lambda m=module, a=args: gt.check(m, *a, reference="both"),
        }
        times: dict[str, list[float]] = {k: [] for k in sides}
        for _ in range(repeats):
            for side, fn in sides.items():  # in turn: the machine's load falls on each alike
                times[side].append(timed(fn))
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = med["ours"] / med["torch"]
        worst = max(worst, ratio)
        print(f"{name:8}{med['torch'] * 1e3:10.1f}ms{med['ours'] * 1e3:10.1f}ms{ratio:7.2f}x"
              f"{med['trace'] * 1e3:8.1f}ms{med['both'] * 1e3:8.1f}ms")  # fmt: skip
    return worst


def diagnosis(x: torch.Tensor, repeats: int) -> None:
    print(f"\n2. diagnosing a custom Function's backward (target under {DIAGNOSIS_TARGET} s)")
    planted = MLP(activation=TanhNoSquare.apply).double()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = gt.check(planted, x)
        seconds.append(time.perf_counter() - start)
        top = result.hints[0]
        assert (top.op, top.got_rule) == ("TanhNoSquare", "g * (1 - y)"), top
    diagnosed = statistics.median(seconds)
    print(f"check + diagnosis {diagnosed:.3f} s (named `{top.got_rule}` at {top.node}): "
          f"{'met' if diagnosed < DIAGNOSIS_TARGET else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
