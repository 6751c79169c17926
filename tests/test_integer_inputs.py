"""Integer inputs (SPEC §3.1): indices, labels and ids, read, checked and run.

They load as integer arrays, are never differentiated (left out of the default `wrt`,
refused in a given one), reach only an op's integer parameters, are checked against the
range each op may index before anything runs, and go through the engines, both
references, a worker process, the reference cache and the reports unchanged.
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import engines_for_tests as E
from gradcheck.cases import InvalidCase, load_file
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.references.cache import ReferenceCache
from gradcheck.runner import RunOptions, run

GATHER = """\
    cases:
      - name: gather
        expr: tanh(take(x, i)) * 2.0
        inputs:
          x: {shape: [5, 3]}
          i: {values: [4, 0, 2, 2, 4], dtype: int64}
      - name: drawn
        expr: sum(take(x, j, axis=1) ** 2.0, axis=0)
        inputs:
          x: {shape: [2, 6]}
          j: {shape: [3, 4], low: 0, high: 5, dtype: int32}
"""


def load_invalid(tmp_path, text: str) -> InvalidCase:
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent(text))
    (item,) = load_file(path)
    assert isinstance(item, InvalidCase), item
    return item


def test_integer_inputs_load_as_integers_and_stay_out_of_wrt(tmp_path):
    gather, drawn = E.load_cases(tmp_path, GATHER)
    assert gather.inputs["i"].dtype == np.int64
    assert gather.inputs["i"].tolist() == [4, 0, 2, 2, 4]
    assert drawn.inputs["j"].dtype == np.int32
    assert drawn.inputs["j"].min() >= 0 and drawn.inputs["j"].max() <= 5
    assert gather.wrt == ["x"] and drawn.wrt == ["x"]
    assert gather.expression.integer_inputs == {"i": "int64"}
    # The float64 twin of a low-precision case keeps its indices as they are.
    assert gather.widened().inputs["i"].dtype == np.int64


def test_wrt_naming_an_integer_input_is_a_case_error_at_its_line(tmp_path):
    case = load_invalid(
        tmp_path,
        """\
        cases:
          - name: w
            expr: take(x, i)
            inputs:
              x: {shape: [3]}
              i: {values: [0, 1], dtype: int64}
            wrt:
              - x
              - i
        """,
    )
    assert case.line == 9
    assert "'i', an integer input (int64)" in case.message


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("{values: [0, 5], dtype: int64}", "take(x, i): index 5 out of range for axis 0 of size 5"),
        ("{values: [-1], dtype: int64}", "index -1 out of range for axis 0 of size 5"),
        ("{shape: [3], dtype: int64}", "i is drawn from [-3, 3], out of range for axis 0"),
        ("{shape: [3], low: 0, high: 5, dtype: int64}", "(draw it with low: 0 and high: 4"),
    ],
)
def test_an_index_out_of_range_is_a_case_error_at_the_input_s_line(tmp_path, values, message):
    case = load_invalid(
        tmp_path,
        f"""\
        cases:
          - name: r
            expr: take(x, i)
            inputs:
              x: {{shape: [5, 2]}}
              i: {values}
        """,
    )
    assert case.line == 6
    assert message in case.message


@pytest.mark.parametrize(
    ("expr", "inputs", "message"),
    [
        ("take(x, i)", "{x: [1.0, 2.0], i: [0.0, 1.0]}", "indices must be an integer input"),
        ("take(x, i) + i", "{x: [1.0, 2.0], i: {values: [0], dtype: int64}}",
         "i is an integer input (int64); only an integer parameter takes one"),
        ("take(x, i)", "{x: [1.0], i: {values: [0.5], dtype: int64}}",
         "0.5 is not a whole number that fits int64"),
        ("take(x, i)", "{x: [1.0], i: {values: [0]}}", "`values:` is for integer inputs"),
        ("take(x, i)", "{x: [1.0], i: {shape: [1], init: uniform, dtype: int32}}",
         "dtype int32 takes init integers"),
        ("take(x, i)", "{x: [1.0], i: {values: [0], dtype: int16}}",
         "an input's dtype must be int32 or int64"),
        ("take(x, i)", "{x: [1.0], i: {values: [3000000000], dtype: int32}}",
         "3000000000 is not a whole number that fits int32"),
    ],
)  # fmt: skip
def test_integer_inputs_misused_are_case_errors(tmp_path, expr, inputs, message):
    case = load_invalid(tmp_path, f"cases:\n  - {{name: m, expr: '{expr}', inputs: {inputs}}}\n")
    assert message in case.message


def test_gathers_with_integer_inputs_pass_against_both_references(tmp_path):
    cases = E.load_cases(tmp_path, GATHER)
    result = run(cases, BuiltinEngine, RunOptions(reference="both"))
    assert [c.status for c in result.cases] == ["passed", "passed"], [
        c.message for c in result.cases
    ]


def test_an_engine_that_drops_the_repeats_fails_on_the_repeated_index(tmp_path):
    class Overwrites(BuiltinEngine):
        """Scatters take's gradient by assignment: a repeated index keeps one share."""

        def vjp(self, tensor, i, g):
            if tensor.op.name != "take":
                return super().vjp(tensor, i, g)
            z = np.zeros(tensor.args[0].value.shape, g.dtype)
            z[tensor.args[1].value] = g  # the bug: no accumulation
            return z

    (gather, _) = E.load_cases(tmp_path, GATHER)
    (case,) = run([gather], Overwrites).cases
    assert case.status == "failed"
    (x,) = case.inputs
    assert not x.comparison.passed


def test_integer_inputs_cross_to_a_worker_and_into_the_cache_and_reports(tmp_path):
    from gradcheck.report.json_report import to_json

    cases = E.load_cases(tmp_path, GATHER)
    cache = ReferenceCache(tmp_path / "cache")
    options = RunOptions(isolate="process", cache=cache)
    first = run(cases, BuiltinEngine, options)
    assert [c.status for c in first.cases] == ["passed", "passed"]
    again = run(E.load_cases(tmp_path, GATHER), BuiltinEngine, options)
    assert [c.status for c in again.cases] == ["passed", "passed"]
    assert cache.hits >= 2  # the second run's references came from the cache
    report = json.loads(to_json(first, tool_version="test"))
    assert [i["name"] for i in report["cases"][0]["inputs"]] == ["x"]


def test_integer_array_getitem_is_take_along_its_axis():
    from gradcheck.expression import parse

    expression = parse("x[i] + y[:, j]", {"x": (3, 2), "y": (2, 4), "i": (2,), "j": (2,)},
                       {"i": "int64", "j": "int32"})  # fmt: skip
    takes = [(n.op.name, n.attrs, n.shape) for n in expression.op_nodes if n.op.name == "take"]
    assert takes == [("take", {"axis": 0}, (2, 2)), ("take", {"axis": 1}, (2, 2))]


@pytest.mark.parametrize("expr", ["x[i, j]", "x[1:, i]", "x[i, 0]"])
def test_integer_array_getitem_beyond_one_array_after_colons_is_refused(expr):
    from gradcheck.expression import ExpressionError, parse

    with pytest.raises(ExpressionError, match="one index array after only ':'s"):
        parse(expr, {"x": (3, 3), "i": (2,), "j": (2,)}, {"i": "int64", "j": "int64"})


def test_check_command_takes_an_integer_input(tmp_path):
    from typer.testing import CliRunner

    from gradcheck.cli import app

    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app,
        ["check", "sum(take(x, i, axis=1))", "-i", "x=3,4", "-i", "i=int64:0,2,2",
         "--format", "json", "--output", str(out), "--no-cache"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (case,) = json.loads(out.read_text())["cases"]
    assert case["status"] == "passed"
    assert [i["name"] for i in case["inputs"]] == ["x"]
