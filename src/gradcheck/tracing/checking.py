"""A traced function checked as a case: the ordinary pipeline, and what only a trace adds.

The program becomes a case (`load_case`, as `gradcheck.check` makes one) and runs through
the runner with the replaying engine in this process. Around it:

* the replay is held to the function itself: its value must be the function's (else the
  trace missed something and nothing is checked: `TraceError`), and its gradient the
  gradient the function's own autograd gives, hooks included (else the case fails with an
  `untraced-gradient` hint: something the trace cannot see changes the gradient);
* a cut (``.detach()``, ``torch.no_grad()``, ``stop_gradient``) whose removal leaves the
  gradient as it is (the shift in a stable logsumexp) is taken out: only a cut that
  changes the gradient is a finding;
* the reference is TensorFlow where every node maps onto the registry (an opaque node
  has no TensorFlow builder), else the finite differences; ``reference="both"`` asks for
  both.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..results import CaseResult, Hint
from .opaque import cuts
from .program import Program, TraceError, case_input


@dataclass
class Traced:
    """A traced function: its program, the engine class that replays it, the function's own
    value on the traced inputs and its own gradient for a cotangent (in `program.wrt`
    order), its name and the framework ("torch", "jax")."""

    program: Program
    engine: type
    value: np.ndarray
    own_grads: Callable[[np.ndarray], list[np.ndarray]]
    name: str
    framework: str


def case_data(traced: Traced, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """The case `traced` is, as the data a case file holds (arrays as arrays)."""
    program = traced.program
    return {
        "name": name,
        "expr": program.source,
        "inputs": {key: case_input(value) for key, value in program.inputs.items()},
        "wrt": list(program.wrt),
        "dtype": program.dtype,
        **{k: v for k, v in options.items() if v is not None},
    }


def default_reference(program: Program) -> str:
    """TensorFlow where every node maps (and it is installed), else finite differences (a
    cut's stop op has a TensorFlow builder: it is no opaque node)."""
    if program.opaque:
        return "numeric"
    return "tensorflow" if importlib.util.find_spec("tensorflow") else "numeric"


def held_to_function(traced: Traced, case: Any, result: CaseResult) -> Hint | None:
    """The replay (what the check's engine gave, in `result`) against the function: a
    `TraceError` where their values differ; the `untraced-gradient` hint where their
    gradients do (None where they agree, or where the replay or the function raised: the
    check itself then says so)."""
    from ..comparison.compare import close_mask

    engine = {i.name: i.comparison.engine for i in result.inputs}
    if (
        result.forward is None
        or result.forward.engine is None
        or any(g is None for g in engine.values())
    ):
        return None
    forward = np.asarray(result.forward.engine, np.float64)
    value = np.asarray(traced.value, np.float64).reshape(forward.shape)
    if not close_mask(value, forward, case.tolerance).all():
        worst = float(np.max(np.abs(value - forward)))
        raise TraceError(
            f"the traced graph does not compute what {traced.name} computes (they differ by "
            f"up to {worst:.3g}): something {traced.name} does is not in the trace (an "
            "in-place update of a tensor it read before, Python state); please report it, "
            "and check it through a case file meanwhile"
        )
    try:
        own = traced.own_grads(case.cotangent)
    except Exception:  # the function's own backward raises: the check will say where
        return None
    differ = [
        name
        for name, mine in zip(case.wrt, own, strict=True)
        if name in engine
        and np.shape(mine) == np.shape(engine[name])
        and not close_mask(engine[name], mine, case.tolerance).all()
    ]
    if not differ:
        return None
    return Hint(
        "untraced-gradient",
        f"{traced.name}'s own gradient for {', '.join(differ)} differs from the gradient of "
        "the ops it runs, replayed node by node: something the trace cannot see changes "
        "the gradient — a hook (Tensor.register_hook, a module's backward hook) or a "
        "gradient changed after the fact",
        "remove what changes the gradient outside the ops (`handle.remove()` for a "
        "`register_hook`), or make that change an op of its own (a "
        "`torch.autograd.Function`, a `jax.custom_vjp`) so gradcheck checks it",
        "likely",
    )


def without_harmless_cuts(traced: Traced, case: Any, make_case: Callable[[], Any]) -> Any:
    """The case with each cut taken out whose removal leaves the replay's gradient as it
    is (a note says so); the case as it was when there is none."""
    from ..comparison.compare import close_mask
    from ..engines.driver import EngineFailure, Unsupported
    from ..engines.reverse import run_engine

    program = traced.program
    found = [b for b, _ in cuts(program)]
    if not found:
        return case

    def grads(c: Any) -> dict[str, np.ndarray] | None:
        try:
            return run_engine(traced.engine(), c.expression, c.inputs, c.wrt, c.cotangent).grads
        except (EngineFailure, Unsupported):
            return None

    base = grads(case)
    if base is None:
        return case
    for cut in found:
        text = cut.text
        cut.text = text[text.index("(") + 1 : -1]  # the cut's argument: no cut
        trial = make_case()
        moved = grads(trial)
        if moved is not None and all(
            close_mask(base[n], moved[n], case.tolerance).all() for n in case.wrt
        ):
            case = trial
            program.notes.append(
                f"{cut.made_by}{f' at {cut.where}' if cut.where else ''} cuts a path that "
                "adds nothing to the gradient here: left out of the check"
            )
        else:
            cut.text = text
    return case


def caller() -> tuple[str, int]:
    """The user's line that asked for the check: the first frame outside gradcheck."""
    import sys
    from pathlib import Path

    from ..api.engines import relative

    package = str(Path(__file__).resolve().parents[1])
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame = frame.f_back
    if frame is None:
        return "<python>", 1
    return relative(frame.f_code.co_filename), frame.f_lineno


def check_traced(
    traced: Traced,
    *,
    name: str | None,
    reference: str | None,
    diagnose: bool,
    modes: Sequence[str] | None,
    **case_options: Any,
) -> Any:
    """Check `traced` as a case, in this process; a `TracedCheck` (`tracing.results`).
    `case_options` are case keys (seed, order, cotangent, tolerance), None where not given."""
    case_options = {**case_options, "modes": list(modes) if modes else None}
    from ..api.calls import InvalidCaseError, _options, _settings
    from ..cases.loader import load_case
    from ..cases.model import InvalidCase
    from ..diagnosis import diagnose_run
    from ..runner import run
    from .explain import explain
    from .results import TracedCheck

    settings = _settings({"cache": False})
    file, line = caller()
    name = name or traced.name
    chosen = reference or default_reference(traced.program)
    options = {**case_options, "reference": chosen}

    def make_case() -> Any:
        data = case_data(traced, name, options)
        item = load_case(data, file=file, line=line, max_elements=settings.max_elements)
        if isinstance(item, InvalidCase):  # a trace gradcheck wrote and cannot read: its bug
            raise InvalidCaseError(
                f"the traced case is not valid: {item.message}", file=file, line=item.line,
                name=item.name,
            )  # fmt: skip
        return item

    case = without_harmless_cuts(traced, make_case(), make_case)
    origin = f"gradcheck.{traced.framework}.check"
    options_ = _options(
        settings, traced.engine, diagnose=diagnose, isolate="none", engine_origin=origin
    )
    ran = run([case], traced.engine, options_)
    result = ran.cases[0]
    untraced = held_to_function(traced, case, result)
    if untraced is not None:
        result.hints.insert(0, untraced)
        if result.status == "passed":
            result.status = "failed"
        ran = diagnose_run(ran, causes=diagnose)
    explain(result, traced.program)
    # what the trace says of itself reaches every format, as a run's notes do
    notes = [f"note: {note}" for note in dict.fromkeys(traced.program.notes)]
    result.message = "; ".join([*notes, *filter(None, [result.message])])
    return TracedCheck(ran, traced.program, traced.framework, case_options)
