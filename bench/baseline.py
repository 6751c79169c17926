"""The benches' baseline: a case's gradients computed the way one would by hand.

TensorFlow ops under a `tf.GradientTape`, then the builtin engine, straight from the
parsed expression: no driver, no validation, no comparison, no report. It deliberately
does not reuse gradcheck's driver, which is what the benches measure.
"""

from __future__ import annotations

import numpy as np

from gradcheck.cases import Case
from gradcheck.engines.builtin.engine import BuiltinEngine


def bare_gradients(case: Case, tf) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(TensorFlow's gradients, the builtin engine's) for every `wrt` name of `case`."""
    expression, dtype = case.expression, case.cotangent.dtype
    wrt = [expression.lookup(n) for n in case.wrt]
    with tf.GradientTape() as tape:
        tensors = {}
        for node in expression.nodes:
            if node.is_input:
                tensors[node] = tf.constant(case.inputs[node.name])
                tape.watch(tensors[node])
            elif node.is_literal:
                tensors[node] = tf.constant(node.literal, dtype=dtype)
            else:
                args = [tensors[a] for a in node.args]
                build = node.op.tf
                tensors[node] = (
                    build(tf, args, **node.attrs)
                    if node.op.variadic
                    else build(tf, *args, **node.attrs)
                )
    want = tape.gradient(
        tensors[expression.output],
        [tensors[n] for n in wrt],
        output_gradients=tf.constant(case.cotangent),
        unconnected_gradients=tf.UnconnectedGradients.ZERO,
    )
    engine = BuiltinEngine()
    built = {}
    for node in expression.nodes:
        if node.is_input:
            built[node] = engine.leaf(node.name, case.inputs[node.name])
        elif node.is_literal:
            built[node] = engine.constant(np.asarray(node.literal, dtype))
        else:
            built[node] = engine.apply(node.op, [built[a] for a in node.args], node.attrs)
    got = engine.grad(built[expression.output], [built[n] for n in wrt], case.cotangent)
    return [w.numpy() for w in want], got
