"""`--repro DIR`: a failing node as a small Python script to run, or step through in a REPL.

For every node the localisation found failing (or raising) alone, `DIR` gets
``<case>.<op>.py`` and ``<case>.<op>.npz`` beside it: the values the node's arguments
take in the case, the cotangent the localisation used, and the right answer for that
one op (the builtin engine's, which the test suite holds to TensorFlow and to finite
differences, with the engine's declared conventions). The script imports the user's
engine, builds the one op through the adapter protocol (SPEC §4) as gradcheck does,
prints expected against got and exits 1 on a mismatch: it needs NumPy and the engine,
and gradcheck only for a named stock engine (`torch`, `jax`, ...).

A case file is untrusted and a script is meant to be run: the case's text (its file,
name, expression) goes into the script only `repr`-quoted, as data, never into a
docstring or comment; file names keep only safe characters; and nothing is written
through a symlink or over an existing file (each file is created exclusively): a script
that cannot be is skipped, with a note saying so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..cases.dtypes import widened
from ..cases.model import Case, InvalidCase
from ..engines.builtin.engine import BuiltinEngine
from ..engines.loading import STOCK, load_engine
from ..results import RunResult
from .localisation.localise import NodeCheck, check_nodes

FAILING = ("failed", "error")
STEM_CHARS = 120  # a file name's limit is 255 bytes; the case's name is cut well before


def write_repros(
    folder: Path, items: Sequence[Case | InvalidCase], run: RunResult, engine: str
) -> tuple[list[Path], list[str]]:
    """The scripts written into `folder` for `run`'s failing nodes, and notes on the
    failing cases that got none (and why)."""
    cases = {(c.file, c.name): c for c in items if isinstance(c, Case)}
    factory = load_engine(engine)
    # The right answer, with the conventions the engine declares (as the diagnosis has it).
    right = functools.partial(BuiltinEngine, dict(getattr(factory, "conventions", None) or {}))
    written: list[Path] = []
    notes: list[str] = []
    used: set[str] = set()
    for result in run.cases:
        case = cases.get((result.file, result.name))
        if result.status not in FAILING or case is None:
            continue
        failing = {n.node for n in result.nodes if n.status in FAILING}
        if not failing:
            notes.append(f"{result.id}: no node fails alone ({_why_none(result)})")
            continue
        checks = check_nodes(case, factory, right, only=lambda n, f=failing: n.text in f, run=False)
        for check in checks:
            part = "" if check.node.part is None else f"_{check.node.part}"  # split_1
            stem = _stem(f"{case.name}.{check.node.op.name}{part}", used)
            folder.mkdir(parents=True, exist_ok=True)
            try:
                _write(folder, stem, case, check, engine)
            except FileExistsError:
                notes.append(
                    f"{result.id}: {folder / stem}.py or .npz already exists (or is a link): "
                    "not overwritten, no script written for it; remove it or choose another folder"
                )
                continue
            written.append(folder / f"{stem}.py")
    return written, notes


def _why_none(result) -> str:
    if not result.nodes:
        return "its nodes were not checked alone: rerun with --diagnose all"
    return "the fault is in how the engine runs the graph, not in one op"


def _stem(name: str, used: set[str]) -> str:
    """`name` as a file name: safe characters only, no leading dot, not too long."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[-STEM_CHARS:].lstrip(".") or "case"
    candidate, n = stem, 1
    while candidate in used:
        n += 1
        candidate = f"{stem}.{n}"
    used.add(candidate)
    return candidate


def _write(folder: Path, stem: str, case: Case, check: NodeCheck, engine: str) -> None:
    want = check.right(check.cotangent)
    arrays = {name: widened(v) for name, v in check.inputs.items()}
    arrays["cotangent"] = np.asarray(check.cotangent, np.float64)
    arrays["want_value"] = np.asarray(want.forward, np.float64)
    arrays.update({f"want_{n}": np.asarray(g, np.float64) for n, g in want.grads.items()})
    script = _script(stem, case, check, engine).encode()
    # Both files created exclusively (O_EXCL never follows a link), the data first: the
    # script that reads it is written only once the data is in place.
    with _created(folder / f"{stem}.npz") as data, _created(folder / f"{stem}.py") as code:
        np.savez(data, **arrays)
        code.write(script)


@contextlib.contextmanager
def _created(path: Path):
    """`path` as a new file, open for writing; `FileExistsError` if anything is there.
    Removed again if the writing fails, or fails for the other file of the pair."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            yield file
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _engine_spec(engine: str) -> str:
    """`engine` as the script finds it from anywhere: a file as an absolute path."""
    if engine == "builtin" or engine in STOCK:
        return engine
    target, colon, name = engine.partition(":")
    if target.endswith(".py") or "/" in target or "\\" in target:
        return os.path.abspath(target) + colon + name
    return engine


def _call(check: NodeCheck) -> str:
    """The op's call as the driver makes it: arguments in order (a list first for a
    variadic op), literals through `constant`, attributes as keywords. It is code, made
    only of identifiers (the op's name, keywords `ast` parsed) and `repr`-ed values."""
    node = check.node
    args = [
        f"constant(engine, {arg.literal!r})"
        if arg.is_literal
        else f'indices(engine, "a{i}")'  # an integer input: a constant, as the driver gives it
        if arg.integer
        else f"a{i}"
        for i, arg in enumerate(node.args)
    ]
    spread = not node.op.variadic or node.op.leading is not None  # einsum(*operands, equation)
    listed = args if spread else [f"[{', '.join(args)}]"]
    keywords = [f"{key}={value!r}" for key, value in node.attrs.items()]
    output = "" if node.part is None else f"[{int(node.part)}]"  # one output of split
    return f"engine.{node.op.name}({', '.join(listed + keywords)}){output}"


def _script(stem: str, case: Case, check: NodeCheck, engine: str) -> str:
    """The script's text: every piece of the case's text in it through `repr`."""
    names = check.names
    return _TEMPLATE.format(
        where=f"{case.file}:{case.line}::{case.name}",
        node=check.node.text,
        stem=stem,
        engine=_engine_spec(engine),
        cwd=os.getcwd(),
        dtype=case.dtype,
        rtol=case.tolerance.rtol,
        atol=case.tolerance.atol,
        params=", ".join(["engine", *names]),
        call=_call(check),
        names=repr(names),
        arguments={
            f"a{i}": arg.text + (f" ({arg.integer}, no gradient)" if arg.integer else "")
            for i, arg in enumerate(check.node.args)
            if not arg.is_literal
        },
    )


_TEMPLATE = '''\
"""gradcheck --repro: one failing node of a case (CASE), the node NODE, alone.

Its arguments (ARGUMENTS) hold the values they take in the case, its cotangent is the
one gradcheck's localisation used, and "expected" is the right answer for this one op.
Run it (python {stem}.py: exit 1 on a mismatch) or step through it in a REPL.
"""

import importlib
import importlib.util
import sys
from pathlib import Path

import numpy as np

CASE = {where!r}  # file:line::name
NODE = {node!r}  # as the case's expression writes it
ARGUMENTS = {arguments!r}  # the node's arguments, as the expression writes them
ENGINE = {engine!r}  # the --engine of the run
CWD = {cwd!r}  # where the run was started: a module spec is imported from there
DTYPE, RTOL, ATOL = {dtype!r}, {rtol!r}, {atol!r}  # the case's
data = np.load(Path(__file__).with_suffix(".npz"))


def load_engine(spec):
    target, _, name = spec.partition(":")
    if target.endswith(".py"):
        sys.path.insert(0, str(Path(target).parent))  # so the engine's siblings import
        loaded = importlib.util.spec_from_file_location(Path(target).stem, target)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    elif ":" in spec:
        sys.path.insert(0, CWD)
        module = importlib.import_module(target)
    else:  # builtin, torch, jax, autograd, tensorflow: gradcheck's own adapters
        from gradcheck.engines.loading import load_engine as stock

        return stock(spec)
    return getattr(module, name or "Engine")


def array(name):
    if DTYPE == "bfloat16":
        import ml_dtypes

        return data[name].astype(ml_dtypes.bfloat16)
    return data[name].astype(DTYPE)


def constant(engine, literal):
    value = np.asarray(literal, array("cotangent").dtype)
    return engine.constant(value) if hasattr(engine, "constant") else value


def indices(engine, name):
    value = data[name]  # integers (int32, int64), as they are
    return engine.constant(value) if hasattr(engine, "constant") else value


def op({params}):
    return {call}


names = {names}
engine = load_engine(ENGINE)()
cotangent = array("cotangent")
if hasattr(engine, "vjp") and not hasattr(engine, "grad"):  # a functional engine
    out = op(engine, *[array(n) for n in names])
    got = engine.vjp(lambda *xs: op(engine, *xs), [array(n) for n in names], cotangent)
else:
    leaves = [engine.leaf(n, array(n)) for n in names]
    out = op(engine, *leaves)
    target, seed = out, cotangent
    if getattr(engine, "scalar_only", False):
        weights = constant(engine, cotangent)
        target = engine.sum(engine.mul(out, weights), axis=None, keepdims=False)
        seed = np.ones((), cotangent.dtype)
    got = engine.grad(target, leaves, seed)
value = engine.value(out) if hasattr(engine, "value") else out

mismatched = 0
for label, want, have in [("value", data["want_value"], value)] + [
    (f"gradient of {{n}}", data["want_" + n], g) for n, g in zip(names, got)
]:
    have = np.asarray(have, np.float64)
    same = have.shape == want.shape  # then: SPEC's tolerance, NaN equal only to NaN
    close = same and np.abs(have - want) <= ATOL + RTOL * np.abs(want)
    ok = same and bool(np.all(close | (np.isnan(have) & np.isnan(want))))
    mismatched += not ok
    shapes = f" (shape {{have.shape}}, expected {{want.shape}})" if have.shape != want.shape else ""
    print(f"{{label}}: {{'ok' if ok else 'MISMATCH'}}{{shapes}}")
    if not ok:
        print("  expected:", np.array2string(want, precision=6).replace("\\n", "\\n            "))
        print("  got:     ", np.array2string(have, precision=6).replace("\\n", "\\n            "))
sys.exit(1 if mismatched else 0)
'''
