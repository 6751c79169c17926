"""TensorFlow's gradient reference as one traced `tf.function`, for a case structure
checked again and again (a fuzz run's examples, `--watch` rounds, a bench's repeats).

Eagerly, TensorFlow pays its Python dispatch on every op and every gradient function:
a small case's reference took 1.0-1.8 ms eagerly and 0.65-0.77 ms traced, but tracing
took 22-52 ms (`bench/per_check.py`'s expressions, a loaded 2-core machine). So a
structure is traced only once its eager references have cost about what a trace does
(`TRACE_AFTER` of them: rent until buying would have paid, never more than twice the
better of the two). The structure's key is `engines.functional.structure_key` (nodes,
ops, attributes, literals, shapes, dtype) with the inputs, `wrt` and cotangent's
shapes. The oracle never changes what it says: the first traced result is compared
with the eager one bit for bit, and a structure whose traced result differs (graph
rewrites such as fused kernels round differently) stays eager; anything the traced
function raises leaves that call to the eager path, which reports it as ever.
"""

from __future__ import annotations

import contextlib
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from ..cases.model import Case
from ..engines.driver import EngineRun, record_returned
from ..engines.functional import structure_key
from .tensorflow import load_tensorflow

TRACE_AFTER = 20
TRACED_KEPT = 128  # each holds a traced graph; the least recently used goes
_eager_runs: Counter[tuple] = Counter()
# None: the structure's traced result differed from the eager one, so it stays eager.
_traced: OrderedDict[tuple, Callable[..., Any] | None] = OrderedDict()


def traced_reference(case: Case, eager: Callable[[], EngineRun]) -> EngineRun:
    """`case`'s reverse-mode reference: `eager()`, or the same from a traced function
    once the case's structure has been computed eagerly `TRACE_AFTER` times."""
    key = _key(case)
    if key is None:
        return eager()
    if key not in _traced:
        _eager_runs[key] += 1
        if _eager_runs[key] <= TRACE_AFTER:
            return eager()
        del _eager_runs[key]
        expected = eager()
        traced = _trace(case)
        try:
            got = _call(traced, case)
        except Exception:
            got = None
        _traced[key] = traced if got is not None and _same(got, expected) else None
        while len(_traced) > TRACED_KEPT:
            _traced.popitem(last=False)
        return expected
    _traced.move_to_end(key)
    traced = _traced[key]
    if traced is None:
        return eager()
    try:
        return _call(traced, case)
    except Exception:  # a value an op refuses (TensorFlow checks some at run time)
        return eager()


def _key(case: Case) -> tuple | None:
    """The structure's key; None where the eager path alone applies (a `wrt` node that
    is no input: gradcheck cuts the graph there, which this function does not)."""
    expression = case.expression
    if any(name not in expression.inputs for name in case.wrt):
        return None
    inputs = tuple((n, case.inputs[n].shape, case.inputs[n].dtype.str) for n in expression.inputs)
    cotangent = (case.cotangent.shape, case.cotangent.dtype.str)
    return structure_key(expression, case.cotangent.dtype), inputs, tuple(case.wrt), cotangent


def _trace(case: Case) -> Callable[..., Any]:
    """The case's expression and its gradients as a `tf.function` of its inputs and
    cotangent, built as `TensorFlowEngine` builds it op by op."""
    tf = load_tensorflow()
    expression, wrt = case.expression, list(case.wrt)
    names, dtype = list(expression.inputs), case.cotangent.dtype

    def program(values: list[Any], cotangent: Any) -> tuple[Any, list[Any]]:
        with tf.GradientTape() as tape:
            built: dict[Any, Any] = {}
            for node in expression.nodes:
                if node.is_input:
                    built[node] = values[names.index(node.name)]
                    if node.name in wrt:
                        tape.watch(built[node])
                elif node.is_literal:
                    built[node] = tf.constant(np.asarray(node.literal, dtype=dtype))
                elif node.is_part:  # one output of an op with several (a list of tensors)
                    built[node] = built[node.args[0]][node.part]
                else:
                    args = [built[a] for a in node.args]
                    op = node.op
                    built[node] = (
                        op.tf(tf, args, **node.attrs)
                        if op.variadic
                        else op.tf(tf, *args, **node.attrs)
                    )
            output = built[expression.output]
        grads = tape.gradient(
            output,
            [built[expression.lookup(n)] for n in wrt],
            output_gradients=tf.cast(cotangent, output.dtype),
            unconnected_gradients=tf.UnconnectedGradients.ZERO,
        )
        return output, grads

    return tf.function(program)


def _call(traced: Callable[..., Any], case: Case) -> EngineRun:
    tf = load_tensorflow()
    values = [tf.constant(case.inputs[n]) for n in case.expression.inputs]
    with _on_this_thread():
        output, grads = traced(values, tf.constant(case.cotangent))
    forward = output.numpy()
    arrays = [g.numpy() for g in grads]
    run = EngineRun(forward, dict(zip(case.wrt, arrays, strict=True)))
    return record_returned(run, [forward, *arrays])


def _on_this_thread() -> contextlib.AbstractContextManager[Any]:
    """The traced graph's kernels run on the calling thread, as eager ops do: TensorFlow's
    default executor hands each op to its inter-op pool, and on a loaded machine every
    handoff waits for a core (the traced reference took 2.6-2.7x the eager one in a bench run
    under load, 0.5-0.9x with this). Where TensorFlow no longer has it, its default."""
    try:
        from tensorflow.python.eager import context
    except ImportError:
        return contextlib.nullcontext()
    return context.function_executor_type("SINGLE_THREADED_EXECUTOR")


def _same(got: EngineRun, expected: EngineRun) -> bool:
    """Bit for bit: the same dtypes, shapes and values (NaNs where the other has them)."""

    def same(a: np.ndarray, b: np.ndarray) -> bool:
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

    return (
        same(got.forward, expected.forward)
        and got.grads.keys() == expected.grads.keys()
        and all(same(got.grads[n], expected.grads[n]) for n in got.grads)
        and got.dtype == expected.dtype
    )
