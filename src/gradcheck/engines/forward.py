"""Forward mode: an engine's JVPs through an expression, one input at a time.

An adapter's ``jvp`` comes in two forms (SPEC §4's extension, in docs/engines.md):

* a tape engine's ``jvp(self, output, wrt, tangents)``: gradcheck builds the expression
  with the inputs as leaves, then asks for the tangent of `output` when the nodes `wrt`
  move along `tangents` (one array each), everything else held fixed;
* the functional form ``jvp(self, fn, primals, tangents)``, for a functional engine (no
  `grad`) or an adapter that sets ``functional_jvp = True`` (``torch.func.jvp``,
  TensorFlow's `ForwardAccumulator`): `fn` is the expression as a function of one input,
  the others held as constants, built from the adapter's op methods as for `vjp`.

Either returns one array, the output's tangent. Each input in `wrt` is asked alone, with
its own seeded tangent (`cases.inputs.tangents`), so a wrong JVP is named by input; the
bindings in `wrt` are checked in reverse mode only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..expression import Expression
from .driver import (
    EngineRun,
    Unsupported,
    as_array,
    build_call,
    build_expression,
    call_engine,
    missing_ops,
    record_returned,
)
from .functional import function_of
from .protocol import is_functional


def input_names(expression: Expression, wrt: Sequence[str]) -> list[str]:
    """The inputs among `wrt`: what forward mode and second order differentiate."""
    return [name for name in wrt if name in expression.inputs]


def functional_jvp(engine: Any) -> bool:
    """Whether `engine.jvp` takes ``(fn, primals, tangents)`` rather than nodes."""
    return is_functional(engine) or bool(getattr(engine, "functional_jvp", False))


def run_jvp(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    wrt: Sequence[str],
    tangents: Mapping[str, np.ndarray],
) -> EngineRun:
    """The forward value, and for each input in `wrt` the output's tangent along its own."""
    if not callable(getattr(engine, "jvp", None)):
        raise Unsupported("engine has no jvp() method, so forward mode (modes: fwd) cannot run")
    missing = missing_ops(engine, expression)
    if missing:
        raise Unsupported(f"engine has no method for {', '.join(missing)}")
    names = input_names(expression, wrt)
    dtype = next(iter(tangents.values())).dtype
    value = getattr(engine, "value", None) or np.asarray
    functional = functional_jvp(engine)
    leaves = set() if functional else set(names)
    built = build_expression(engine, expression, inputs, leaves, dtype)
    raw = call_engine("value", value, built[expression.output])
    run, returned = EngineRun(as_array(raw, "value(output)"), {}), [raw]
    for name in names:
        tangent = tangents[name].copy()  # the engine may write into what it is given
        # NotImplementedError from jvp means "not supported": an engine whose forward mode
        # lacks an op (autograd's make_jvp has no JVP for expit).
        if functional:
            fn = function_of(engine, expression, inputs, [name], dtype, None)
            primal = np.array(inputs[name])
            result = build_call("jvp", engine.jvp, fn, [primal], [tangent])
        else:
            node = built[expression.inputs[name]]
            result = build_call("jvp", engine.jvp, built[expression.output], [node], [tangent])
        run.grads[name] = as_array(result, f"jvp along {name}")
        returned.append(result)
    return record_returned(run, returned)
