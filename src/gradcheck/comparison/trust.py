"""Comparing against a reference that knows its own accuracy (`EngineRun.untrusted`,
`slack`: the numeric reference's), and two references against each other (``both``).

The elements a reference cannot judge are taken from the engine's own gradients, so
that they pass and the notes say what was left out; the tolerance of an input grows by
the reference's error bound for it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..cases.dtypes import LOW_PRECISION
from ..cases.model import Case, Tolerance
from ..engines.driver import EngineRun
from ..results import Hint
from .compare import compare


def judged_part(reference: EngineRun, got: EngineRun) -> EngineRun:
    """`reference` with the elements it cannot judge taken from the engine's gradients, so
    that only what it can judge is compared (the notes say what was left out)."""
    if not any(mask.any() for mask in reference.untrusted.values()):
        return reference
    grads = dict(reference.grads)
    for name, mask in reference.untrusted.items():
        engine = got.grads.get(name)
        if engine is not None and np.shape(engine) == mask.shape and mask.any():
            grads[name] = np.where(mask, engine, grads[name]).astype(grads[name].dtype)
    return replace(reference, grads=grads)


def nothing_judged(reference: EngineRun) -> bool:
    """True when the reference can judge no element of any gradient (say, the forward
    value is not finite): a case checked against it checked nothing."""
    masks = reference.untrusted.values()
    return bool(masks) and all(mask.all() for mask in masks)


def tolerance(case: Case, reference: EngineRun, name: str) -> Tolerance:
    """The case's tolerance for `name`, widened by the reference's own error bound."""
    slack = reference.slack.get(name, 0.0)
    tol = case.tolerance
    return Tolerance(tol.rtol, tol.atol + slack) if slack else tol


# What a reference's `grads` hold for each check, as `disagreements` words it.
QUANTITIES = {"vjp": "gradient of", "jvp": "JVP along", "hvp": "gradient of sum(grad * v) for"}


def disagreements(
    case: Case, tensorflow: EngineRun, numeric: EngineRun, check: str = "vjp"
) -> list[Hint]:
    """`reference-disagreement` hints: where TensorFlow and finite differences differ on what
    the finite differences can judge (the oracle itself is in doubt)."""
    numeric = judged_part(numeric, tensorflow)
    found = []
    checks = [("forward value", tensorflow.forward, numeric.forward, case.tolerance)]
    checks += [
        (
            f"{QUANTITIES[check]} {name}",
            tensorflow.grads[name],
            numeric.grads[name],
            tolerance(case, numeric, name),
        )
        for name in tensorflow.grads
    ]
    # float16/bfloat16: finite differences in float64 are the exact answer TensorFlow's
    # own rounding is judged against (comparison/compare.py), not a rival to match closely.
    low = case.dtype in LOW_PRECISION and not case.tolerance_given
    for what, tf_value, fd_value, tol in checks:
        result = compare(fd_value, tf_value, tol, fd_value if low else None)
        if result.passed:
            continue
        found.append(
            Hint(
                "reference-disagreement",
                f"TensorFlow and finite differences of the NumPy forward disagree on the "
                f"{what} ({result.mismatched} of {result.size} elements, max abs diff "
                f"{result.max_abs_diff}): the oracle itself is in doubt",
                "find which is right: compare the op's TensorFlow builder with its NumPy "
                "forward (`gradcheck ops`), and pin the gradient that is right with `expect`",
                "exact",
                node=case.expression.output.text if what == "forward value" else None,
            )
        )
    return found
