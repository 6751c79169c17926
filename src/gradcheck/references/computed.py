"""A reference computed, no cache: TensorFlow's (the expression under `tf.GradientTape`)
or the numeric one (finite differences of the registry's NumPy forwards)."""

from __future__ import annotations

from ..cases.model import Case
from ..engines.checks import run_check
from ..engines.driver import EngineFailure, EngineRun, Unsupported
from ..util.stderr import silenced_stderr
from .numeric import numeric_reference
from .numeric_modes import numeric_hvp, numeric_jvp
from .tensorflow import TensorFlowEngine
from .traced import traced_reference

# The numeric reference of each check (vjp: gradients, jvp: forward mode, hvp: second order).
_NUMERIC = {"vjp": numeric_reference, "jvp": numeric_jvp, "hvp": numeric_hvp}


def computed_reference(case: Case, kind: str, check: str = "vjp") -> EngineRun:
    """The `kind` reference of `case` ("tensorflow" or "numeric") for `check`, computed,
    no cache."""
    return _NUMERIC[check](case) if kind == "numeric" else _tensorflow_reference(case, check)


def _tensorflow_reference(case: Case, check: str = "vjp") -> EngineRun:
    unbuilt = [n.op for n in case.expression.op_nodes if n.op and n.op.tf is None]
    if unbuilt:
        raise EngineFailure(
            f"op {unbuilt[0].name} ({unbuilt[0].origin}) declares no TensorFlow builder (tf=), "
            "so only finite differences can judge it: set `reference: numeric` on the case "
            "or run with --reference numeric"
        )
    try:
        # Forward mode records on no tape; second order on two, nested.
        engine = TensorFlowEngine(order={"vjp": 1, "jvp": 0, "hvp": 2}[check])
    except ImportError as e:
        message = (
            f"TensorFlow is not installed ({e}) and the reference is not cached; install "
            "gradcheck[tensorflow], or use --reference numeric"
        )
        raise EngineFailure(message) from None
    try:
        # TensorFlow's C++ side logs to fd 2 on first use of some kernels (oneDNN, CUDA).
        with silenced_stderr():
            if check == "vjp":  # traced once the case's structure has recurred often enough
                return traced_reference(case, lambda: run_check(engine, case, check))
            return run_check(engine, case, check)
    except Unsupported as e:  # a NotImplementedError inside TensorFlow
        raise EngineFailure(str(e)) from e
