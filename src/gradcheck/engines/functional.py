"""Functional engines (SPEC §4): JAX, HIPS autograd, anything built on ``vjp(f, *primals)``.

Such an adapter has ``vjp(self, fn, primals, cotangent)`` instead of `leaf`, `constant`
and `grad`. gradcheck builds `fn` from the adapter's own op methods: a pure function of
the `wrt` values that computes the case's expression, with the other inputs and the
literals as constants (through the adapter's `constant` if it has one, else as NumPy
arrays). The forward value comes from calling the op methods on the inputs directly.

Gradients with respect to intermediate nodes are gradcheck's business: for each such
`wrt` binding a second function takes that node's value (the engine's own forward value
there) as its argument, everything upstream of it held fixed, and `vjp` differentiates
that, so the adapter never sees anything but functions of arrays.

Each such function is an `ExpressionFunction`: callable as any function, it also carries
its computation with the case's values as arguments (`program`, `constants`) and a `key`
naming its structure, so an engine that compiles can compile once per structure; the
stock JAX adapter does (SPEC §4 is silent: an adapter that ignores them loses nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..expression import Expression, Node
from .driver import (
    EngineRun,
    as_array,
    build_expression,
    call_engine,
    check_grads,
    record_returned,
    scalar_loss,
)


def run_functional(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    wrt: Sequence[str],
    cotangent: np.ndarray,
    *,
    ask_twice: bool = False,
) -> EngineRun:
    dtype = cotangent.dtype
    built = build_expression(engine, expression, inputs, set(), dtype)
    value = getattr(engine, "value", None) or np.asarray
    raw = call_engine("value", value, built[expression.output])
    forward, returned = as_array(raw, "value(output)"), [raw]
    scalar_only = bool(getattr(engine, "scalar_only", False))
    seed = np.ones((), dtype) if scalar_only else cotangent

    leaves = [n for n in wrt if n in expression.inputs]
    # One call for the inputs together; one per intermediate node, cut out of the graph there.
    groups = [(leaves, [np.array(inputs[n]) for n in leaves])] if leaves else []
    for name in wrt:
        if name not in expression.inputs:
            node = expression.lookup(name)
            primal = as_array(call_engine("value", value, built[node]), f"value({node.text})")
            groups.append(([name], [primal]))
    weights = cotangent if scalar_only else None
    # Made once, so that an engine that compiles `fn` (jax.jit) compiles it once per case.
    functions = [
        function_of(engine, expression, inputs, names, dtype, weights) for names, _ in groups
    ]

    def ask() -> dict[str, np.ndarray]:
        grads: dict[str, np.ndarray] = {}
        for (names, primals), fn in zip(groups, functions, strict=True):
            copies = [p.copy() for p in primals]  # the engine may write into what it is given
            result = call_engine("vjp", engine.vjp, fn, copies, seed.copy())
            grads.update(check_grads(result, names, "vjp"))
            returned.extend(result)
        return {name: grads[name] for name in wrt}

    run = EngineRun(forward, ask())
    if ask_twice:
        run.grads_again = ask()
    return record_returned(run, returned)


class ExpressionFunction:
    """The case's expression as a function of some of its nodes, ``fn(*values)``, for a
    functional engine to differentiate.

    It is `program` applied to `constants` (the case's input values and, for a
    scalar-only engine, the cotangent weighting its output). `key` says everything else
    the computation depends on (the expression's nodes, ops and attributes, the nodes it
    takes, every shape and dtype), so two functions with one key differ in their
    `constants` only: an engine that compiles (`jax.jit`) can compile
    ``program(constants, *values)`` once per key, and every later check of that
    structure (a fuzz run's, a watch round's, the stale check's second ask) reuses it.
    """

    __name__ = "gradcheck_expression"

    def __init__(
        self, program: Callable[..., Any], constants: tuple[np.ndarray, ...], key: tuple, doc: str
    ) -> None:
        self.program, self.constants, self.key, self.__doc__ = program, constants, key, doc

    def __call__(self, *values: Any) -> Any:
        # Copies: an engine that writes into what it is given must not change the next ask's.
        return self.program(tuple(c.copy() for c in self.constants), *values)


def function_of(
    engine: Any,
    expression: Expression,
    inputs: Mapping[str, np.ndarray],
    names: Sequence[str],
    dtype: np.dtype,
    cotangent: np.ndarray | None,
) -> ExpressionFunction:
    """The case's expression as a function of the nodes `names` (its output, or with a
    `cotangent`, the scalar ``sum(output * cotangent)``) for the engine to differentiate."""
    nodes: list[Node] = [expression.lookup(n) for n in names]
    order = list(expression.inputs)
    constants = tuple(np.array(inputs[n]) for n in order)
    if cotangent is not None:
        constants += (np.array(cotangent),)

    def program(constants: tuple[Any, ...], *values: Any) -> Any:
        given = dict(zip(nodes, values, strict=True))
        held = dict(zip(order, constants, strict=False))
        built = build_expression(engine, expression, held, set(), dtype, given, copy=False)
        output = built[expression.output]
        return output if cotangent is None else scalar_loss(engine, output, constants[-1])

    key = (*structure_key(expression, dtype), tuple(names), _shapes(constants))
    doc = f"{expression.source.strip()} as a function of {', '.join(names)}"
    return ExpressionFunction(program, constants, key, doc)


def structure_key(expression: Expression, dtype: np.dtype) -> tuple:
    """What an expression computes, short of its inputs' values: each node's op (by
    identity too, as an `--ops` file read again declares a new op of the same name),
    arguments, attributes, literal and shape, in order."""
    position = {node: i for i, node in enumerate(expression.nodes)}
    nodes = tuple(
        (
            (node.op.name, id(node.op)) if node.op else node.name,
            tuple(position[a] for a in node.args),
            repr(sorted(node.attrs.items())),
            node.literal,
            tuple(node.shape),
            node.part,
        )
        for node in expression.nodes
    )
    return nodes, position[expression.output], np.dtype(dtype).str


def _shapes(arrays: Sequence[np.ndarray]) -> tuple:
    return tuple((a.shape, a.dtype.str) for a in arrays)
