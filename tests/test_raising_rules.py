"""Rules that raise, hang or keep state (SPEC §6.1 `raises`, `hangs`, `stateful`): each
found by running the engine's rule alone, named at its op and node with the user's line,
and leading the case's report in every format.

The engines are the builtin engine with one rule changed (tests/planted_engines.py), and
the seed's own engine (examples/seed_engine.py), whose matmul VJP raises on non-square
batches.
"""

from __future__ import annotations

import html
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from case_files import make_case
from gradcheck.cases import Case
from gradcheck.report import render, to_github, to_html, to_json, to_junit
from gradcheck.results import CaseResult, Hint, RunResult
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted_engines.py"
SEED = ROOT / "examples" / "seed_engine.py"


def shapes(**named: tuple[int, ...]) -> dict:
    return {name: {"shape": list(shape)} for name, shape in named.items()}


def checked(case: Case, engine: str, **options) -> RunResult:
    return run([case], engine, RunOptions(**options))


def line_of(path: Path, text: str) -> str:
    """`file:line` of the one line of `path` holding `text`: where the rule raises."""
    [number] = [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    return f"{path.name}:{number}"


def ops_hints(result: CaseResult, mechanism: str) -> list[Hint]:
    return [h for h in result.hints if h.code == "op-vjp" and h.mechanism == mechanism]


# -- raises: the inputs that make a rule raise ---------------------------------------------


def test_a_rule_that_raises_for_axis_none_says_so_with_the_line(tmp_path):
    case = make_case(tmp_path, "sum(exp(x))", shapes(x=(2, 3)))
    [result] = checked(case, f"{PLANTED}:SumRaisesOnAxisNone").cases
    assert result.status == "error"
    top = result.hints[0]
    assert (top.code, top.op, top.node, top.mechanism) == ("op-vjp", "sum", "sum(exp(x))", "raises")
    assert top.region == "only when axis=None" and top.confidence == "exact"
    assert "`TypeError`" in top.message
    assert line_of(PLANTED, "np.expand_dims(g, axis)") in top.message
    assert "np.expand_dims(g, axis)" in top.message  # the line's own text


def test_a_rule_that_raises_on_a_size_1_batch_axis_says_so(tmp_path):
    case = make_case(tmp_path, "matmul(x, y)", shapes(x=(2, 3, 4), y=(1, 4, 5)))
    [result] = checked(case, f"{PLANTED}:MatmulReshapesBack").cases
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "matmul", "raises")
    assert top.region == "only when a batch axis has size 1"
    assert top.arg == 1  # y's gradient is the one reshaped from a broadcast
    assert "`ValueError`" in top.message
    assert line_of(PLANTED, "product.reshape(") in top.message
    assert "matmul's VJP raises only when a batch axis has size 1" in top.message


def test_the_seed_engine_on_non_square_batches_is_matmuls_full_transpose(tmp_path):
    """Every node raises, but every node is a matmul: its rule, not the driver."""
    case = make_case(
        tmp_path, "matmul(matmul(x, y), z)", shapes(x=(2, 2, 3), y=(3, 4), z=(2, 4, 2))
    )
    [result] = (run_ := checked(case, str(SEED))).cases
    assert result.status == "error"
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "matmul", "fault:matmul.full-transpose")
    every = [*result.hints, *(a for h in result.hints for a in h.also)]
    assert not [h for h in every if h.code.startswith(("backprop", "fault:backprop"))]
    transposing = [h for h in result.hints if "tf.transpose(b.tensor)" in h.message]
    assert transposing and line_of(SEED, "tf.matmul(adj, tf.transpose(b.tensor))") in (
        transposing[0].message
    )
    assert run_.root_causes[0].hint.mechanism == "fault:matmul.full-transpose"


def test_a_rule_that_raises_in_float64_alone_is_probed_in_float32(tmp_path):
    """The seed's engine adds every gradient into a float32 zero: a float64 case raises
    on every input, a float32 one on none (and a 2-D matmul is right)."""
    case = make_case(tmp_path, "matmul(x, y)", shapes(x=(2, 3), y=(3, 4)))
    [result] = checked(case, str(SEED)).cases
    top = result.hints[0]
    assert (top.code, top.op, top.mechanism) == ("op-vjp", "matmul", "raises")
    assert top.region == "only in float64 (in float32, on none of the probes)"
    assert top.fix.startswith("keep the gradients in the inputs' dtype (float64)")
    assert line_of(SEED, "unbroadcast(tf.add(adjoints[p], local_grad)") in top.message


def test_every_node_of_one_op_raising_everywhere_is_that_ops_rule(tmp_path):
    case = make_case(tmp_path, "matmul(matmul(x, y), z)", shapes(x=(2, 3), y=(3, 3), z=(3, 2)))
    [result] = checked(case, f"{PLANTED}:MatmulAlwaysRaises").cases
    assert {(h.code, h.op, h.mechanism, h.region) for h in result.hints} == {
        ("op-vjp", "matmul", "raises", "for every input")
    }


def test_nodes_of_different_ops_raising_everywhere_is_the_driver(tmp_path):
    case = make_case(tmp_path, "exp(x) * y", shapes(x=(2, 3), y=(2, 3)))
    [result] = checked(case, f"{ROOT / 'tests' / 'engines_for_tests.py'}:RaisingGrad").cases
    assert [h.code for h in result.hints] == ["backprop-driver"]


# -- every format leads with the node that raised, then the traceback ---------------------


@pytest.fixture(scope="module")
def raised(tmp_path_factory) -> RunResult:
    case = make_case(tmp_path_factory.mktemp("raised"), "sum(exp(x))", shapes(x=(2, 3)))
    return checked(case, f"{PLANTED}:SumRaisesOnAxisNone")


LEAD = "op-vjp"
SAYS = "sum(exp(x)): sum's VJP raises only when axis=None"
FRAME = 'planted_engines.py", line'  # the traceback's frame in the engine's file


def _before(text: str, first: str, then: str) -> bool:
    return first in text and then in text and text.index(first) < text.index(then)


def test_the_terminal_leads_with_the_raising_node_then_the_traceback(raised):
    buffer = io.StringIO()
    render(raised, Console(file=buffer, width=200, force_terminal=False))
    text = buffer.getvalue()
    assert _before(text, LEAD, SAYS) and _before(text, SAYS, FRAME)


def test_json_leads_with_the_raising_node_and_keeps_the_traceback(raised):
    [case] = json.loads(to_json(raised, tool_version="0"))["cases"]
    top = case["hints"][0]
    assert (top["code"], top["mechanism"], top["node"], top["op"]) == (
        "op-vjp", "raises", "sum(exp(x))", "sum",
    )  # fmt: skip
    assert top["region"] == "only when axis=None" and FRAME in case["traceback"]


def test_html_leads_with_the_raising_node_then_the_traceback(raised):
    page = to_html(raised, tool_version="0")
    top = page[page.index('class="hint top"') :]
    assert _before(top, html.escape(SAYS), "traceback</summary>")


def test_junit_and_github_lead_with_the_raising_node(raised):
    error = ET.fromstring(to_junit(raised)).find(".//error")
    assert error is not None and error.get("type") == LEAD
    assert error.get("message", "").startswith(f"{LEAD}: {SAYS}")
    assert _before(error.text or "", SAYS, FRAME)
    assert f"{LEAD}: {SAYS}" in to_github(raised)


# -- stateful: a rule whose second identical backward pass differs -------------------------


def test_a_rule_that_writes_into_its_inputs_is_stateful_at_its_op(tmp_path):
    case = make_case(tmp_path, "exp(x * y)", shapes(x=(2, 3), y=(2, 3)))
    [result] = checked(case, f"{PLANTED}:MulInPlace").cases
    assert result.status == "failed"
    assert {(h.code, h.op, h.node, h.mechanism) for h in result.hints} == {
        ("op-vjp", "mul", "x * y", "stateful")
    }
    assert {h.arg for h in result.hints} == {0, 1}
    assert "`g * b`" in result.hints[0].fix


# -- hangs: a rule that never returns -------------------------------------------------------


def test_a_rule_that_loops_is_named_with_the_line_it_was_interrupted_at(tmp_path):
    """The case times out in its worker (interrupted before the worker is killed); each
    node alone then gets its share of the timeout, and the looping one is named."""
    case = make_case(tmp_path, "tanh(x) * y", shapes(x=(2, 3), y=(2, 3)), timeout=3)
    [result] = checked(case, f"{PLANTED}:TanhLoops", isolate="process").cases
    assert result.status == "error" and "timed out after 3 s in grad()" in result.message
    top = result.hints[0]
    assert (top.code, top.op, top.node, top.arg, top.mechanism) == (
        "op-vjp", "tanh", "tanh(x)", 0, "hangs",
    )  # fmt: skip
    loop = {line_of(PLANTED, "while steps >= 0:"), line_of(PLANTED, "steps += 1")}
    assert any(f"interrupted at {at}" in top.message for at in loop), top.message
    assert [(n.op, n.status) for n in result.nodes] == [("tanh", "error"), ("mul", "passed")]
