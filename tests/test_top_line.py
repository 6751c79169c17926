"""The top line is the truth (SPEC §6.1) and one bug is one root cause (SPEC §6.2).

The engines are real: a custom ``torch.autograd.Function`` through the stock PyTorch
adapter, whose backward ignores its upstream gradient (PyTorch's driver is never the
suspect); and `planted_engines.Learner`, the builtin engine with a learner's four classic
bugs at once, over cases some of which hold two of them.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from corpus import ROOT
from engines_for_tests import load_cases
from gradcheck.cases import Case, load_file
from gradcheck.cli import app
from gradcheck.cli.ops import _rule_lines
from gradcheck.engines.loading import load_engine
from gradcheck.engines.protocol import framework_driver
from gradcheck.engines.reverse import run_engine
from gradcheck.engines.stock.torch import TorchEngine
from gradcheck.errors import UsageError
from gradcheck.fuzzing.search import bug_key
from gradcheck.ops import all_ops
from gradcheck.report.html_report import to_html
from gradcheck.report.json_report import to_json
from gradcheck.report.rich_report import render
from gradcheck.results import RunResult
from gradcheck.runner import RunOptions, check_case, run
from planted_engines import LeadingOnly, Learner

SMOOTH_RELU_OPS = ROOT / "examples" / "custom_op" / "smooth_relu_ops.py"
ENV = {"COLUMNS": "200", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}

IGNORES_UPSTREAM = """
import torch

from gradcheck.engines.stock.torch import TorchEngine


class SmoothRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logaddexp(torch.zeros_like(x), x)

    @staticmethod
    def backward(ctx, upstream):
        (x,) = ctx.saved_tensors
        return torch.sigmoid(x)  # the local derivative only: upstream never used


class Engine(TorchEngine):
    name = "torch+smooth_relu-ignores-upstream"

    def smooth_relu(self, x):
        return SmoothRelu.apply(x)
"""


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def walk(hints: list[dict]) -> list[dict]:
    """Every hint, and every hint folded under one."""
    return [h for hint in hints for h in [hint, *walk(hint.get("also", []))]]


# -- a framework's driver is never the suspect ------------------------------------------


def test_the_stock_adapters_declare_their_framework_as_their_driver():
    for spec, driver in [("torch", "torch"), ("jax", "jax"), ("autograd", "autograd")]:
        assert framework_driver(load_engine(spec)) == driver
    assert framework_driver(load_engine("tensorflow")) == "tensorflow"
    assert framework_driver(load_engine("builtin")) is None  # it walks its own graph


def test_a_driver_gradcheck_does_not_know_is_a_usage_error(tmp_path: Path):
    path = tmp_path / "engine.py"
    path.write_text(
        "from gradcheck.engines.builtin.engine import BuiltinEngine\n\n\n"
        "class Engine(BuiltinEngine):\n    driver = 'pytorch'\n"
    )
    with pytest.raises(UsageError, match="driver = 'pytorch'"):
        load_engine(str(path))


def test_a_torch_function_that_ignores_its_upstream_gradient_is_named_at_its_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Under the default cotangent (random) the case fails, and every hint is about the
    op's rule: none blames the backward driver, which is PyTorch's."""
    monkeypatch.chdir(tmp_path)
    engine = tmp_path / "engine.py"
    engine.write_text(IGNORES_UPSTREAM)
    ops = str(SMOOTH_RELU_OPS)
    result = invoke(
        "check", "smooth_relu(x)", "-i", "x=3,4", "--ops", ops, "--engine", str(engine),
        "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (case,) = json.loads(result.stdout)["cases"]
    top = case["hints"][0]
    assert (top["code"], top["mechanism"], top["op"]) == (
        "op-vjp",
        "ignores-upstream",
        "smooth_relu",
    )
    assert top["node"] == "smooth_relu(x)"
    everything = walk(case["hints"]) + walk([h for i in case["inputs"] for h in i["hints"]])
    drivers = [h["code"] for h in everything if h["code"] == "backprop-driver"]
    assert drivers + [h["code"] for h in everything if h["code"].startswith("fault:backprop")] == []


class SquareIgnoresUpstream(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, upstream):
        (x,) = ctx.saved_tensors
        return 2 * x  # upstream never used


class TorchSquareIgnoresUpstream(TorchEngine):
    def square(self, x):
        return SquareIgnoresUpstream.apply(x)


def test_a_framework_engine_whose_every_node_fails_is_never_blamed_on_its_driver(
    tmp_path: Path,
):
    """A builtin op's rule replaced, at every node of the expression: what a driver that
    hands each VJP ones would give (`fault:backprop.no-upstream`), yet the hints name the
    op and never the driver."""
    (case,) = load_cases(
        tmp_path,
        """
        cases:
          - name: nested
            expr: square(square(x))
            inputs: {x: {shape: [3, 2]}}
        """,
    )
    result = check_case(case, TorchSquareIgnoresUpstream, RunOptions())
    assert result.status == "failed"
    assert result.hints[0].op == "square", [h.code for h in result.hints]
    codes = [h.code for h in result.hints] + [a.code for h in result.hints for a in h.also]
    assert not [c for c in codes if c == "backprop-driver" or c.startswith("fault:backprop")]


# -- one bug, one root cause: a learner's four bugs ---------------------------------------

LEARNER_CASES = """
defaults:
  cotangent: random
cases:
  - name: square_matmul
    expr: a @ b
    inputs: {a: {shape: [3, 4]}, b: {shape: [4, 4]}}
  - name: batched_matmul
    description: a's batch axis has size 1, broadcast against b's 2
    expr: a @ b
    inputs: {a: {shape: [1, 3, 4]}, b: {shape: [2, 4, 4]}}
    wrt: [a]
  - name: batched_matmul_tanh
    description: two bugs at two nodes, three at two nodes with b's gradient
    expr: tanh(a @ b)
    inputs: {a: {shape: [1, 3, 4]}, b: {shape: [2, 4, 4]}}
  - name: sub
    expr: x - y
    inputs: {x: {shape: [3]}, y: {shape: [3]}}
  - name: tanh
    expr: tanh(x)
    inputs: {x: {shape: [2, 3]}}
  - name: tanh_sub
    description: two bugs at two nodes
    expr: tanh(x) - y
    inputs: {x: {shape: [2, 3]}, y: {shape: [2, 3]}}
  - name: cross_entropy
    description: passes; the longest op name, for the report card's columns
    expr: sparse_softmax_cross_entropy(x * 2.0, k)
    inputs: {x: {shape: [3, 4]}, k: {values: [0, 3, 1], dtype: int64}}
"""


@pytest.fixture(scope="module")
def learner_cases(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    return load_cases(tmp_path_factory.mktemp("learner"), LEARNER_CASES)


@pytest.fixture(scope="module")
def learner(learner_cases: list[Case]) -> RunResult:
    return run(learner_cases, Learner, RunOptions())


def by_name(result: RunResult) -> dict:
    return {c.name: c for c in result.cases}


def names(cause) -> set[str]:
    return {i.split("::")[-1] for i in cause.cases}


def test_a_learners_four_bugs_are_four_root_causes_each_at_its_op(learner: RunResult):
    assert [c.status for c in learner.cases] == ["failed"] * 6 + ["passed"]
    causes = {(c.hint.op, c.hint.mechanism or c.hint.code): names(c) for c in learner.root_causes}
    assert causes == {
        ("matmul", "fault:matmul.no-batch-reduce"): {"batched_matmul", "batched_matmul_tanh"},
        ("matmul", "transposed"): {"square_matmul", "batched_matmul_tanh"},
        ("sub", "fault:sub.sign"): {"sub", "tanh_sub"},
        ("tanh", "formula"): {"tanh", "tanh_sub", "batched_matmul_tanh"},
    }
    (tanh,) = [c for c in learner.root_causes if c.hint.op == "tanh"]
    assert tanh.hint.code == "op-vjp"
    # the formula the engine computes, recovered (SPEC §6.1), not a number at an index
    assert (tanh.hint.got_rule, tanh.hint.confidence) == ("g * (1 - y)", "exact")
    says = "computes `g * (1 - y)`; the right rule is `g * (1 - np.tanh(x)**2)`"
    assert says in tanh.hint.message


def test_two_wrong_rules_in_one_case_are_two_top_level_findings(learner: RunResult):
    case = by_name(learner)["tanh_sub"]
    top = [(h.op, h.mechanism) for h in case.hints if h.code == "op-vjp"]
    assert ("sub", "fault:sub.sign") in top and ("tanh", "formula") in top
    folded = [a for h in case.hints for a in h.also if a.code == "op-vjp"]
    assert folded == []


def test_the_reports_count_the_learners_bugs_once(learner: RunResult):
    console = Console(file=io.StringIO(), width=100, color_system=None)
    render(learner, console)
    assert "run diagnosis: 6 failing cases, 4 root causes" in console.file.getvalue()
    summary = json.loads(to_json(learner, tool_version="test"))["summary"]
    assert len(summary["root_causes"]) == 4
    page = to_html(learner, tool_version="test")
    listed = page.split('class="hints root-causes">', 1)[1].split("</ul>", 1)[0]
    assert listed.count("<li>") == 4
    card = summary["ops"]
    assert card["matmul"]["mechanisms"] == {"transposed": 2, "fault:matmul.no-batch-reduce": 2}


def test_a_case_with_two_causes_cites_the_one_its_top_hint_names(learner: RunResult):
    for case in learner.cases[:6]:
        _, cause = learner.root_cause_of(case)
        assert cause.hint.cause == case.hints[0].cause, case.name


def test_a_fingerprint_and_the_node_hint_naming_it_are_one_bug_to_the_fuzzer(
    learner: RunResult, learner_cases: list[Case]
):
    """The two cases that found sub.sign, one by the whole case's fingerprint, one by the
    mechanism of sub's node (tanh's VJP is wrong there too, and recovered exactly, so that
    case's fuzz key is tanh's): one rule, one key."""
    cases = by_name(learner)
    whole, node = cases["sub"], cases["tanh_sub"]
    assert whole.hints[0].code == "fault:sub.sign"
    [at_sub] = [h for h in node.hints if h.mechanism == "fault:sub.sign"]
    case = {c.name: c for c in learner_cases}
    assert bug_key(whole, case["sub"]) == at_sub.rule == ("fault:sub.sign", "sub")
    assert at_sub.cause == whole.hints[0].cause


# -- every hint about an op names it -------------------------------------------------------


def test_a_broadcast_fault_leads_with_the_op_whose_gradient_was_not_summed(tmp_path: Path):
    """The seed's batched matmul under the seed's unbroadcast: the top line is about
    matmul, and no hint of the case or of its run leaves the op out."""
    cases = load_cases(
        tmp_path,
        """
        cases:
          - name: batched
            expr: a @ b
            inputs: {a: {shape: [2, 3, 4]}, b: {shape: [1, 4, 5]}}
        """,
    )
    result = run(cases, LeadingOnly, RunOptions())
    (case,) = result.cases
    top = case.hints[0]  # or matmul.no-batch-reduce: no case of this run tells them apart
    assert (top.op, top.node) == ("matmul", "a @ b") and top.message.startswith("matmul's ")
    (leading,) = [h for h in case.hints if h.code == "fault:broadcast.leading-only"]
    assert (leading.op, leading.node) == ("matmul", "a @ b")
    assert leading.message.startswith("matmul's VJP does not sum its size-1 batch axes")
    about_ops = [h for h in case.hints if h.code.startswith("fault:") or h.code == "op-vjp"]
    assert [h.op for h in about_ops if h.op is None] == []
    (cause,) = result.root_causes
    assert cause.hint.op == "matmul"


# -- 80 columns: no cell cut mid-word ------------------------------------------------------

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def whole_at_80(output: str, cells: list[str]) -> None:
    """Every line of `output` within 80 columns, and every name the `cells` hold in it
    whole (a name cut at the column's edge leaves two names that are not)."""
    assert max(len(line) for line in output.splitlines()) <= 80
    shown = set(NAME.findall(output))
    cut = {name for cell in cells for name in NAME.findall(cell)} - shown
    assert cut == set()


@pytest.mark.parametrize("rules", [[], ["--rules"]])
def test_gradcheck_ops_with_an_engine_reads_at_80_columns(rules: list[str]):
    result = CliRunner().invoke(
        app, ["ops", "--engine", "torch", *rules], env={**ENV, "COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    cells = ["yes"]
    for op in all_ops():
        cells += [
            op.signature,
            op.tf_name or "",
            *(_rule_lines(op, "numpy") if rules else [op.doc]),
        ]
    whole_at_80(result.stdout, cells)
    assert {"tf.linalg.matrix_transpose", "sparse_softmax_cross_entropy(logits,"} <= set(
        result.stdout.split()
    )


def test_the_run_s_report_card_reads_at_80_columns(learner: RunResult):
    console = Console(file=io.StringIO(), width=80, color_system=None)
    render(learner, console)
    text = console.file.getvalue()
    card = text[text.index("report card:") :]
    found = [m for record in learner.ops.values() for m in record.mechanisms]
    assert "sparse_softmax_cross_entropy" in learner.ops and found
    whole_at_80(card, [*learner.ops, *found])
    assert set(found) <= set(card.replace(",", " ").split())  # a mechanism is one word


# -- numbers quoted are ones the report shows, or say where they come from -----------------


def test_a_driver_hint_says_where_the_numbers_it_quotes_come_from():
    """At an inner node the driver hint quotes the engine's gradient there, which the
    report does not show: it says so, and the number is that gradient's."""
    cases = [
        c
        for c in load_file(ROOT / "tests/corpus/cases/backprop.yaml")
        if c.name == "reused_after_exp"
    ]
    (case,) = cases
    engine = load_engine(f"{ROOT}/tests/corpus/tape_bugs.py:AddsLaterSharesTwice")
    result = check_case(case, engine, RunOptions())
    top = result.hints[0]
    assert (top.code, top.mechanism, top.node) == ("backprop-driver", "unknown", "exp(x)")
    assert (
        "its gradient (the engine's at that node, asked for beside the inputs' and not shown)"
        in top.message
    )
    quoted = re.search(
        r"is (-?[\d.e+-]+) at index \(([\d, ]+)\), where (-?[\d.e+-]+) is right", top.message
    )
    assert quoted is not None, top.message
    at = tuple(int(i) for i in quoted.group(2).split(","))
    got = run_engine(engine(), case.expression, case.inputs, ["x", "h"], case.cotangent)
    assert float(quoted.group(1)) == pytest.approx(float(got.grads["h"][at]), rel=1e-5)
