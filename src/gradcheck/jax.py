"""Check a JAX function's gradients with no case file: ``gradcheck.jax.check(fn, x)``.

`fn` is any function of JAX or NumPy arrays, pytrees of them included (a dict of
parameters). gradcheck traces it once with ``jax.make_jaxpr`` into its own expression
graph, equation by equation (``jit`` inlined; a ``jax.custom_vjp``, or a
``jax.custom_jvp`` defined outside JAX, is one node whose gradient is the user's rule; a
primitive no gradcheck op says is one node too), and checks the gradient against
TensorFlow where every equation maps onto gradcheck's ops, else against finite
differences (``reference="both"``: both). A failure is localised node by node, with the
mechanism, the rule the bwd computes where it can be recovered, a fix in JAX spelling
and the user's line. See docs/pytorch-and-jax.md.

Arrays keep their dtype: float64 inputs are checked in float64, float32 in float32. The
function is traced with JAX's 64-bit mode (``jax_enable_x64``) on where its differentiated
inputs are float64 (without it JAX would quietly compute them in float32) and off, JAX's
default, where they are float32, so that its Python and NumPy constants stay float32 as
they do in a default session. The check replays the trace with the stock JAX adapter,
whose import turns 64-bit mode on for the process, as ``--engine jax`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .tracing.program import TraceError
from .tracing.results import TracedCheck

__all__ = ["TraceError", "TracedCheck", "assert_gradients", "check"]


def check(
    fn: Callable[..., Any],
    *args: Any,
    argnums: int | Sequence[int] | None = None,
    seed: int | None = None,
    reference: str | None = None,
    modes: Sequence[str] | None = None,
    order: int | None = None,
    cotangent: Any = None,
    tolerance: dict[str, float] | None = None,
    name: str | None = None,
    diagnose: bool = True,
    **kwargs: Any,
) -> TracedCheck:
    """Check the gradients of ``fn(*args, **kwargs)``.

    The differentiated inputs are, as in ``jax.test_util.check_grads``, the float arrays
    among the positional arguments, inside pytrees too (`argnums`, an int or a sequence of
    them as in ``jax.grad``, picks the positional arguments; default all of them). Integer
    and bool arrays, Python numbers, other leaves and the keyword arguments are constants,
    held as ``jax.grad`` holds what it does not differentiate. Several outputs are checked
    as one. float32 and float64 take gradcheck's tolerances (SPEC §2; `tolerance`
    ``{"rtol":, "atol":}`` to change them), no step size to tune: the finite differences
    run in float64. `seed` fixes the check's random cotangent (JAX's own randomness takes the
    key fn is given); `reference` is "numeric", "tensorflow" or "both" (default: TensorFlow
    where every equation maps onto gradcheck's ops, else finite differences); `modes`
    ``["rev", "fwd"]`` checks forward mode too and `order=2` second order (as
    ``check_grads``' ``modes`` and ``order``; a ``custom_vjp`` has no forward mode: that
    check is unsupported, in JAX's words). Keyword arguments other than these go to `fn`.
    """
    from .tracing.checking import check_traced
    from .tracing.jax_fn import trace

    traced = trace(fn, args, kwargs, argnums)
    return check_traced(
        traced,
        name=name,
        reference=reference,
        diagnose=diagnose,
        modes=modes,
        seed=seed,
        order=order,
        cotangent=cotangent,
        tolerance=tolerance,
    )


def assert_gradients(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> TracedCheck:
    """`check`, for pytest: an ``AssertionError`` led by the top hint when it fails."""
    return check(fn, *args, **kwargs).assert_passed()
