"""Check a PyTorch function's gradients with no case file: ``gradcheck.torch.check(fn, x)``.

`fn` is any function of tensors, or an ``nn.Module`` (its parameters are inputs too).
gradcheck runs it once on the arguments, tracing every ATen op it runs into its own
expression graph (a custom ``torch.autograd.Function`` is one node, whose gradient is
its backward), and checks the gradient against TensorFlow where every op maps onto
gradcheck's, else against finite differences (``reference="both"``: both). A failure
is localised node by node, with the mechanism, the rule the backward computes where it
can be recovered, a fix in PyTorch spelling and the user's line. See
docs/pytorch-and-jax.md.
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
    params: bool | None = None,
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

    The differentiated inputs are, as in ``torch.autograd.gradcheck``, the float tensor
    arguments that require grad (all float tensor arguments where none does) and, for an
    ``nn.Module``, its parameters that require grad (`params`, True for a module). Integer
    and bool tensors, and floats that do not require grad, are constants. Several outputs
    are checked as one. float32 and float64 take gradcheck's tolerances (SPEC §2;
    `tolerance` ``{"rtol":, "atol":}`` to change them), no step size to tune: the
    finite differences run in float64. `seed` fixes the random numbers fn draws (dropout)
    and the check's random cotangent; `reference` is "numeric", "tensorflow" or "both"
    (default: TensorFlow where every op maps onto gradcheck's, else finite differences);
    `modes` ``["rev", "fwd"]`` checks forward mode too and `order=2` second order
    (``gradgradcheck``'s job). Keyword arguments other than these go to `fn`.
    """
    from .tracing.checking import check_traced
    from .tracing.torch_fn import trace

    traced = trace(fn, args, kwargs, params=params, seed=seed)
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
