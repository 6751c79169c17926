"""`gradcheck init-engine`: the adapter template, its first cases, and NotImplementedError."""

from __future__ import annotations

import ast
import inspect
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcheck.cases import Case, load_file
from gradcheck.cli import app
from gradcheck.cli.scaffold import cases_path, engine_template, write_scaffold
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.driver import EngineFailure, Unsupported
from gradcheck.engines.loading import load_engine
from gradcheck.engines.reverse import run_engine
from gradcheck.errors import UsageError
from gradcheck.expression import parse
from gradcheck.ops import all_ops

STUB = "        raise NotImplementedError\n"

# What a learner writes first: reverse mode for mul and sum (README's tiny engine).
NODE = """

class Node:
    def __init__(self, value, parents=()):
        self.value, self.parents = np.asarray(value), list(parents)
"""
FILLED = {
    "leaf": "return Node(value)",
    "value": "return node.value",
    "mul": """
        vjps = [(a, lambda g: g * b.value), (b, lambda g: g * a.value)]
        return Node(a.value * b.value, vjps)
    """,
    "sum": """
        def vjp(g):
            if not keepdims and axis is not None:
                g = np.expand_dims(g, axis)
            return np.broadcast_to(g, x.value.shape)

        return Node(x.value.sum(axis=axis, keepdims=keepdims), [(x, vjp)])
    """,
    "grad": """
        order, seen, stack = [], set(), [(output, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
            elif id(node) not in seen:
                seen.add(id(node))
                stack += [(node, True)] + [(p, False) for p, _ in node.parents]
        grads = {id(output): cotangent}
        for node in reversed(order):
            g = grads.get(id(node))
            for parent, vjp in node.parents if g is not None else ():
                grads[id(parent)] = grads.get(id(parent), 0) + vjp(g)
        return [grads.get(id(n), np.zeros_like(n.value)) for n in wrt]
    """,
}


def fill(source: str, method: str, body: str) -> str:
    """`source` with the stub of `method` replaced by `body`."""
    at = source.index(STUB, source.index(f"    def {method}("))
    code = textwrap.indent(textwrap.dedent(body).strip() + "\n", " " * 8)
    return source[:at] + code + source[at + len(STUB) :]


@pytest.fixture
def scaffold(tmp_path, monkeypatch):
    """`gradcheck init-engine my_engine.py` run in an empty folder."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["init-engine", "my_engine.py"])
    assert result.exit_code == 0, result.output
    assert "gradcheck run my_engine_cases.yaml --engine my_engine.py" in result.output
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, ["run", *args], env={"COLUMNS": "200"})


def test_the_template_and_its_cases_are_written(scaffold):
    assert (scaffold / "my_engine.py").is_file()
    assert (scaffold / "my_engine_cases.yaml").is_file()
    assert cases_path("sub/x.py") == Path("sub/x_cases.yaml")


def test_the_template_is_valid_python_with_every_op_of_the_registry(scaffold):
    source = (scaffold / "my_engine.py").read_text()
    ast.parse(source)
    engine = load_engine(str(scaffold / "my_engine.py"))
    assert engine.name == "my_engine"
    for method in ("leaf", "constant", "value", "grad"):
        assert callable(getattr(engine, method)) and getattr(engine, method).__doc__
    for op in all_ops():
        method = getattr(engine, op.name)
        params = list(inspect.signature(method).parameters.values())[1:]
        assert [p.name for p in params] == [*op.params, *op.attrs], op.name
        defaults = {p.name: p.default for p in params if p.default is not p.empty}
        assert defaults == dict(op.attrs), op.name
        assert " ".join(op.tf_name.split()) in " ".join(method.__doc__.split())  # may wrap
        with pytest.raises(NotImplementedError):
            method(engine(), *([None] * len(op.params)))


def test_the_template_is_ruff_clean(scaffold):
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    rules = "E,F,W,I,B,UP,SIM,RUF"
    checked = subprocess.run(
        [ruff, "check", "--isolated", "--select", rules, "--line-length", "88", "my_engine.py"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout
    formatted = subprocess.run(
        [ruff, "format", "--isolated", "--check", "my_engine.py"], capture_output=True, text=True
    )
    assert formatted.returncode == 0, formatted.stdout


def test_an_existing_file_is_not_overwritten_without_force(scaffold):
    (scaffold / "my_engine.py").write_text("# my work\n")
    refused = CliRunner().invoke(app, ["init-engine", "my_engine.py"])
    assert refused.exit_code == 2
    assert "my_engine.py already exists; pass --force" in refused.stderr
    assert (scaffold / "my_engine.py").read_text() == "# my work\n"
    (scaffold / "my_engine.py").unlink()
    (scaffold / "my_engine_cases.yaml").write_text("# my cases\n")
    refused = CliRunner().invoke(app, ["init-engine", "my_engine.py"])
    assert refused.exit_code == 2 and not (scaffold / "my_engine.py").exists()
    forced = CliRunner().invoke(app, ["init-engine", "my_engine.py", "--force"])
    assert forced.exit_code == 0
    assert "raise NotImplementedError" in (scaffold / "my_engine.py").read_text()
    assert "cases:" in (scaffold / "my_engine_cases.yaml").read_text()
    with pytest.raises(UsageError, match=r"\.py"):
        write_scaffold(scaffold / "my_engine.txt")


def test_the_first_case_file_loads(scaffold):
    items = load_file(scaffold / "my_engine_cases.yaml")
    assert len(items) >= 1 and all(isinstance(item, Case) for item in items), items
    used = {n.op.name for item in items for n in item.expression.op_nodes if n.op}
    assert used == {"mul", "sum"}


def test_the_template_reports_its_cases_as_skipped(scaffold):
    skipped = run("my_engine_cases.yaml", "--engine", "my_engine.py")
    assert skipped.exit_code == 0, skipped.output
    assert skipped.output.count("SKIPPED") == 2
    assert "leaf is not implemented" in skipped.output
    assert "2 skipped" in skipped.output
    strict = run("my_engine_cases.yaml", "--engine", "my_engine.py", "--strict")
    assert strict.exit_code == 1, strict.output
    assert "2 failed" in strict.output


def test_filling_in_leaf_value_grad_mul_and_sum_makes_the_cases_pass(scaffold):
    engine_file = scaffold / "my_engine.py"
    source = engine_file.read_text() + NODE
    half = fill(fill(source, "leaf", FILLED["leaf"]), "value", FILLED["value"])
    engine_file.write_text(half)
    waiting = run("my_engine_cases.yaml", "--engine", "my_engine.py")
    assert waiting.exit_code == 0 and "x * y is not implemented" in waiting.output
    for method, body in FILLED.items():
        source = fill(source, method, body)
    engine_file.write_text(source)
    passed = run("my_engine_cases.yaml", "--engine", "my_engine.py")
    assert passed.exit_code == 0, passed.output
    assert "2 passed" in passed.output


def test_an_op_with_several_outputs_is_filled_in_returning_a_tuple(scaffold):
    """split's method says it returns one node per output; filled in so, a case that
    indexes split's outputs passes, and the template says so for every such op."""
    engine_file = scaffold / "my_engine.py"
    source = engine_file.read_text()
    for op in all_ops():
        if op.multi:
            at = source.index(f"    def {op.name}(")
            assert "Return a tuple (or list) of your nodes, one per output." in " ".join(
                source[at : source.index(STUB, at)].split()
            ), op.name
    source += NODE
    for method, body in FILLED.items():
        source = fill(source, method, body)
    source = fill(
        source,
        "split",
        """
        count = num_or_sizes  # a count of equal pieces, as tf.split
        pieces = np.split(x.value, count, axis=axis)

        def piece_vjp(k):
            def vjp(g):
                full = [np.zeros_like(p) for p in pieces]
                full[k] = g
                return np.concatenate(full, axis=axis)

            return vjp

        return tuple(Node(p, [(x, piece_vjp(k))]) for k, p in enumerate(pieces))
        """,
    )
    engine_file.write_text(source)
    (scaffold / "split_cases.yaml").write_text(
        "cases:\n"
        "  - name: halves\n"
        "    expr: |\n"
        "      h = split(x, 2, axis=1)\n"
        "      sum(h[0] * h[1] * h[1])\n"
        "    inputs:\n"
        "      x: {shape: [3, 4]}\n"
    )
    passed = run("split_cases.yaml", "--engine", "my_engine.py")
    assert passed.exit_code == 0, passed.output
    assert "1 passed" in passed.output


# -- the driver: NotImplementedError while building is "unsupported" -------------------


class PartialEngine(BuiltinEngine):
    def sum(self, x, axis=None, keepdims=False):
        if keepdims:
            raise NotImplementedError("keepdims")
        return super().sum(x, axis=axis, keepdims=keepdims)


class BrokenGradEngine(BuiltinEngine):
    def grad(self, output, wrt, cotangent):
        raise NotImplementedError


class BrokenOpEngine(BuiltinEngine):
    def sum(self, x, axis=None, keepdims=False):
        raise ValueError("a bug, not a gap")


def drive(engine, source: str):
    x = np.arange(6.0).reshape(2, 3)
    expression = parse(source, {"x": x.shape})
    cotangent = np.ones(expression.output.shape)
    return run_engine(engine, expression, {"x": x}, ["x"], cotangent)


def test_not_implemented_while_building_is_unsupported_but_other_errors_are_not():
    assert drive(PartialEngine(), "sum(x, axis=0)").grads["x"].shape == (2, 3)
    with pytest.raises(Unsupported, match=r"sum\(x, axis=0, keepdims=True\).*\(keepdims\)"):
        drive(PartialEngine(), "sum(x, axis=0, keepdims=True)")
    with pytest.raises(EngineFailure, match="NotImplementedError"):
        drive(BrokenGradEngine(), "sum(x)")  # grad is required: an error, not a gap
    with pytest.raises(EngineFailure, match="a bug, not a gap"):
        drive(BrokenOpEngine(), "sum(x)")


def test_the_template_names_every_op_once():
    source = engine_template("engine.py")
    names = [n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)]
    ops = [op.name for op in all_ops()]
    assert sorted(names) == sorted(["leaf", "constant", "value", "grad", *ops])
