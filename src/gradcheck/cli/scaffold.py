"""`gradcheck init-engine`: an engine adapter template, generated from the op registry.

The template has `leaf`, `constant`, `value` and `grad` documented, and one method per
registered op with its parameters and attributes (defaults as the registry declares
them), each raising NotImplementedError. The driver treats a NotImplementedError
raised while an expression is built like a missing method: the case is *unsupported*
(skipped; failed under ``--strict``), so the template runs from the start and the
report shows which cases wait for which method. Next to it goes a first case file,
``<stem>_cases.yaml``, whose cases need only `mul` and `sum`.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..errors import UsageError

if TYPE_CHECKING:
    from ..ops import Op

WIDTH = 88  # the template is ruff-clean under the common line limits
SECTIONS = {
    "elementwise": "elementwise ops: arguments broadcast as in NumPy and TensorFlow",
    "linalg": "linear algebra: matmul's batch axes broadcast; dot, outer on 1-D",
    "nn": "neural-network ops",
    "reductions": "reductions: axis is None (every axis), an int or a list of ints",
    "shape": "shape ops",
    "unary": "more elementwise ops: special functions, activations, zero-gradient ops",
    "cumulative": "products and running sums: prod's axis as a reduction's, cumsum's one axis",
    "statistics": "var, std and norm: axis as a reduction's",
    "comparisons": "comparisons (0/1 in the case dtype, no gradient), where and clip",
    "gathers": "gathers: integer indices (int32 or int64); a repeated index accumulates",
    "contractions": "contractions: tensordot's axes an int or a pair; einsum's equation first",
    "solvers": "inverses and solvers: square matrices in the last two axes, batched",
    "layout": "layout ops: pads, tiles, repeats, rolls, dilations (VJPs add copies)",
    "conv": "convolutions: NHWC/NWC, HWIO/WIO unless the formats say; SAME is uneven",
    "pooling": "pools: NHWC/NWC by default, ksize and strides an int or one per axis",
    "splits": "ops with several outputs: return a tuple or list of nodes, one per output",
    "normalization": "normalisation over axis (training mode, no scale or shift) and soft labels",
    "user": "user-defined ops (--ops)",
}
PARAM_NOTES = {
    "getitem": "`index` is a tuple of ints, slices, None and Ellipsis (x[0, :, None]).",
}


def cases_path(engine_path: str | Path) -> Path:
    """The first case file written next to the adapter `engine_path`."""
    path = Path(engine_path)
    return path.with_name(f"{path.stem}_cases.yaml")


def write_scaffold(engine_path: str | Path, *, force: bool = False) -> tuple[Path, Path]:
    """Write the adapter template and its first case file; refuse to overwrite either.

    Returns the two paths written. `UsageError` when `engine_path` is not a ``.py``
    file name, or when either file exists and `force` is not set.
    """
    from ..util.atomic import write_atomic

    engine_file = Path(engine_path)
    if engine_file.suffix != ".py":
        raise UsageError(f"{engine_file}: the adapter is a Python file; name it e.g. my_engine.py")
    cases_file = cases_path(engine_file)
    for path in (engine_file, cases_file):
        if path.is_dir():
            raise UsageError(f"{path} is a folder")
        if path.exists() and not force:
            raise UsageError(f"{path} already exists; pass --force to overwrite it")
    write_atomic(engine_file, engine_template(engine_file, cases_file))
    write_atomic(cases_file, cases_template(engine_file, cases_file))
    return engine_file, cases_file


def engine_template(
    engine_file: str | Path = "my_engine.py", cases_file: str | Path | None = None
) -> str:
    """The adapter template's source: class `Engine`, named after `engine_file`'s stem."""
    from ..ops import all_ops

    engine_file = Path(engine_file)
    cases_file = Path(cases_file) if cases_file is not None else cases_path(engine_file)
    name = engine_file.stem
    methods, section = [], None
    for op in all_ops():
        group = "user" if op.origin else op.tf.__module__.rsplit(".", 1)[-1]
        if group != section:
            section = group
            methods.append(_section(SECTIONS.get(group, f"{group} ops")))
        methods.append(_op_method(op))
    return _HEADER.format(
        name=name,
        version=__version__,
        command=f"gradcheck run {cases_file.as_posix()} --engine {engine_file.as_posix()}",
    ) + "\n".join(methods)


def cases_template(
    engine_file: str | Path = "my_engine.py", cases_file: str | Path | None = None
) -> str:
    """The first case file: cases that need only `mul` and `sum` (and leaf, value, grad)."""
    engine_file = Path(engine_file)
    cases_file = Path(cases_file) if cases_file is not None else cases_path(engine_file)
    return _CASES.format(
        name=engine_file.stem,
        command=f"gradcheck run {cases_file.as_posix()} --engine {engine_file.as_posix()}",
    )


def _section(title: str) -> str:
    rule = "-" * max(4, WIDTH - len(title) - 12)
    return f"    # -- {title} {rule}\n"


def _literal(value: object) -> str:
    """A default as ruff format writes it: strings in double quotes."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _op_method(op: Op) -> str:
    params = ["self", *op.params, *(f"{k}={_literal(v)}" for k, v in op.attrs.items())]
    if op.leading is not None:  # einsum(self, *operands, equation=None)
        params = ["self", f"*{op.params[0]}", *params[2:]]
    summary = f"{op.signature} -> {op.tf_name or 'no TensorFlow builder'}"
    if op.operator:
        summary += f", also the operator {'-x' if op.operator == 'u-' else op.operator}"
    meaning = op.doc or f"user-defined op, declared at {op.origin}"
    details = [meaning if meaning.endswith(".") else f"{meaning}."]
    if op.variadic:
        how = "your nodes, spread" if op.leading else "a list of your nodes"
        details.append(f"`{op.params[0]}` is {how}.")
    if op.multi:
        details.append("Return a tuple (or list) of your nodes, one per output.")
    if op.name in PARAM_NOTES:
        details.append(PARAM_NOTES[op.name])
    details += [
        f"`{p}` is integer (your `constant()` of an int32/int64 array) and has no gradient."
        for p in op.integer
    ]
    doc = _docstring(summary, " ".join(details))
    return f"{_def_line(op.name, params)}\n{doc}        raise NotImplementedError\n"


def _def_line(name: str, params: list[str]) -> str:
    """`def name(params):` as ruff format writes it: on one line, else the parameters on
    one line of their own, else one per line."""
    joined = ", ".join(params)
    if len(line := f"    def {name}({joined}):") <= WIDTH:
        return line
    if len(inner := f"        {joined}") <= WIDTH:
        return f"    def {name}(\n{inner}\n    ):"
    return f"    def {name}(\n" + "".join(f"        {p},\n" for p in params) + "    ):"


def _docstring(summary: str, details: str) -> str:
    """`summary: details` on one line when it fits, else the summary, a blank line and
    the details wrapped."""
    indent = " " * 8
    one_line = f'{indent}"""{summary}: {details}"""'
    if len(one_line) <= WIDTH:
        return one_line + "\n"
    if re.match(r"[a-z]{2,} ", details):  # a sentence now, not the rest of one
        details = details[0].upper() + details[1:]
    body = textwrap.fill(details, WIDTH, initial_indent=indent, subsequent_indent=indent)
    if len(f'{indent}"""{summary}.') > WIDTH:  # a long TensorFlow name on lines of its own
        signature, tf_name = summary.split(" -> ", 1)
        mapping = textwrap.fill(
            f"-> {tf_name}", WIDTH - 1, initial_indent=indent, subsequent_indent=indent + "   "
        )
        if len(f'{indent}"""{signature}') > WIDTH:  # a long signature wrapped at words
            opening = f'{indent}"""'
            signature = textwrap.fill(
                signature, WIDTH, initial_indent=opening, subsequent_indent=indent
            )[len(opening) :]
        summary = f"{signature}\n{mapping}"
    return f'{indent}"""{summary}.\n\n{body}\n{indent}"""\n'


_HEADER = '''\
"""{name}: a gradcheck engine adapter. Fill in what your engine supports.

Generated by `gradcheck init-engine` (gradcheck {version}) from its op registry.
Check the engine with:

    {command}

For every case gradcheck makes a fresh `Engine()`, builds the case's expression by
calling the methods below (`leaf` for each input, then one op method per operation,
the op's attributes always passed as keywords with their defaults filled in), asks
`value` for the output's forward value and `grad` for the gradients, and compares
both with TensorFlow's, explaining every difference.

Fill in `leaf`, `value` and `grad` first, then the ops your engine has. A case that
uses an op whose method still raises NotImplementedError (or that is deleted) is
skipped as unsupported, and fails under --strict. Your nodes are your engine's own
objects (tensors, variables...); gradcheck only hands them back to your methods.
`gradcheck ops` lists every op with its TensorFlow counterpart.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Engine:
    name = "{name}"  # shown in reports

    # -- required ------------------------------------------------------------------

    def leaf(self, name: str, value: np.ndarray) -> Any:
        """A differentiable input: your engine's node holding `value`.

        `value` is a NumPy array of the case's dtype (a fresh copy); `name` is the
        input's name in the case.
        """
        raise NotImplementedError

    def constant(self, value: np.ndarray) -> Any:
        """A value never differentiated: a number in the expression, or an input not in
        the case's `wrt`. Optional; this default makes it a leaf, which is also correct.
        """
        return self.leaf("constant", value)

    def value(self, node: Any) -> Any:
        """The forward value of `node`: anything np.asarray accepts."""
        raise NotImplementedError

    def grad(self, output: Any, wrt: list[Any], cotangent: np.ndarray) -> list[Any]:
        """One array per node in `wrt`: the gradient of sum(output * cotangent).

        `cotangent` has the output's shape (all ones is the gradient of sum(output),
        what tape.gradient gives for a non-scalar target). A node the output does not
        depend on gets zeros. `wrt` may hold intermediate nodes, not only leaves: raise
        if your engine cannot do that, and the inputs are still compared. gradcheck
        asks twice and expects the same answer. An engine that only differentiates
        scalars sets `scalar_only = True` on the class: gradcheck then builds
        sum(mul(output, constant(cotangent))) with your mul and sum and asks for its
        gradient (cotangent 1). A functional engine (JAX-style) implements
        vjp(self, fn, primals, cotangent) instead of leaf, constant and grad.
        """
        raise NotImplementedError

'''

_CASES = """\
# First cases for the {name} engine. Check them with
#
#   {command}
#
# A case is a name, an expression (the ops of `gradcheck ops`; `@ + - * / **` are
# matmul add sub mul div pow), its inputs (literal arrays, or random specs
# {{shape, init, seed}}) and optionally wrt, dtype, cotangent, tolerance, seed, expect
# and tags; `gradcheck schema` describes every key. These two need only leaf, value,
# grad, mul and sum. Add cases as your engine grows: one per op, then broadcasting
# (x: [2, 3] with b: [3]) and batched matmul, where hand-written gradients go wrong.
cases:
  - name: mul_sum
    description: the gradient of sum(x * y) is y for x and x for y
    expr: sum(x * y)
    inputs:
      x: [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
      y: {{shape: [2, 3], init: normal}}

  - name: square_by_mul_sum_axis
    description: >-
      x is used twice, so its gradient must add up both uses (2 * x * g), and the sum
      runs over one axis; the cotangent, random by default, checks every output element
      on its own
    expr: sum(x * x, axis=1)
    inputs:
      x: {{shape: [2, 3]}}
"""
