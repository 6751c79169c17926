"""The three report formats, fed hand-built results: every status, NaN and shape mismatches."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from rich.console import Console

from gradcheck.report import plain_text, render, summary_line, to_dict, to_json, to_junit
from gradcheck.report.junit_report import classname
from gradcheck.results import CaseResult, Comparison, Hint, InputResult, NodeResult, RunResult

ANSI = re.compile(r"\x1b\[")

TOP = Hint(
    code="fault:matmul.full-transpose",
    message="matmul's VJP transposes every axis of the batched operand; "
    "the builtin engine with that fault reproduces these numbers exactly",
    fix="use matrix_transpose (swap only the last two axes) in matmul's gradient",
    confidence="exact",
    op="matmul",
    node="matmul(matmul(x, y), z)",
)
TRANSPOSED = Hint(
    code="transposed",
    message="x's gradient equals the reference with axes 0 and 2 swapped",
    fix="check which axes the gradient transposes",
    confidence="likely",
    axes=[0, 2],
)
SHAPE = Hint(
    code="shape-mismatch",
    message="y's gradient has shape (2, 2, 2) but y has shape (2, 2)",
    fix="sum the gradient over the broadcast batch axis",
    confidence="possible",
)
NAN = Hint(
    code="nan-mismatch",
    message="the engine has NaN where the reference is finite",
    fix="look for log or sqrt of zero in the backward pass",
    confidence="possible",
)


def _comparison(reference: np.ndarray, engine: np.ndarray) -> Comparison:
    same = reference.shape == engine.shape
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(engine - reference) if same else None
        relative = float(np.max(diff / np.abs(reference))) if same else None
    mismatched = int(np.sum(~(diff <= 1e-7))) if same else reference.size
    return Comparison(
        status="passed" if same and mismatched == 0 else "failed",
        reference_shape=reference.shape,
        engine_shape=engine.shape,
        max_abs_diff=float(np.max(diff)) if same else float("nan"),
        max_rel_diff=relative,
        mismatched=mismatched,
        size=reference.size,
        worst_index=(0, 0, 1) if same and mismatched else None,
        reference=reference,
        engine=engine,
    )


def _passed() -> CaseResult:
    a = np.arange(4.0).reshape(2, 2)
    return CaseResult(
        name="seed-plain-matmul",
        file="cases/seed.yaml",
        line=3,
        status="passed",
        expr="matmul(x, y)",
        forward=_comparison(a, a.copy()),
        inputs=[InputResult("x", _comparison(a, a.copy())), InputResult("y", _comparison(a, a))],
        duration_s=0.012,
    )


def _failed() -> CaseResult:
    reference = np.arange(8.0).reshape(2, 2, 2) + 1
    x_engine = reference.transpose(2, 1, 0).copy()
    x_engine[1, 1, 1] = np.nan
    x = InputResult("x", _comparison(reference, x_engine), hints=[NAN, TRANSPOSED])
    y = InputResult("y", _comparison(np.ones((2, 2)), np.ones((2, 2, 2))), hints=[SHAPE])
    return CaseResult(
        name="seed-[red]batched[/red]-matmul",
        file="cases/seed.yaml",
        line=9,
        status="failed",
        expr="matmul(matmul(x, y), z)",
        forward=_comparison(reference, reference.copy()),
        inputs=[x, y],
        nodes=[NodeResult("matmul(x, y)", "matmul", "failed", [0, 1])],
        hints=[TOP, TRANSPOSED, SHAPE],
        duration_s=0.25,
        tags=["seed"],
    )


def _error() -> CaseResult:
    return CaseResult(
        name="engine-raises",
        file="cases/errors.yml",
        line=4,
        status="error",
        expr="exp(x)",
        message="engine raised ValueError: [bold]bad[/bold] shape",
        traceback="Traceback (most recent call last):\n"
        '  File "my_engine.py", line 12, in exp\n'
        "ValueError: \x1b[31mbad shape\x1b[0m",
        duration_s=0.003,
    )


def _skipped() -> CaseResult:
    return CaseResult(
        name="needs-logsumexp",
        file="cases/nn.yaml",
        line=20,
        status="skipped",
        message="unsupported: no logsumexp",
    )


def _invalid() -> CaseResult:
    return CaseResult(
        name="mlp",
        file="cases/mlp.yaml",
        line=7,
        status="invalid",
        message="cases/mlp.yaml:7: matmul(h, w2): inner dimensions 4 and 3 differ",
    )


@pytest.fixture
def run() -> RunResult:
    cases = [_passed(), _failed(), _error(), _skipped(), _invalid()]
    return RunResult(
        engine="my-engine", reference="tensorflow 2.16.1", cases=cases, duration_s=0.8412
    )


def _rich(run: RunResult, **options: bool) -> str:
    buffer = io.StringIO()
    render(run, Console(file=buffer, width=80, force_terminal=False), **options)
    return buffer.getvalue()


# --- JSON -------------------------------------------------------------------------------


def test_json_has_every_spec_key_with_the_right_types(run: RunResult) -> None:
    data = json.loads(to_json(run, tool_version="0.1.0"))
    assert data["tool"] == "gradcheck"
    assert data["version"] == "0.1.0"
    assert data["engine"] == "my-engine"
    assert data["reference"] == "tensorflow 2.16.1"
    assert data["summary"] == {
        "passed": 1,
        "failed": 1,
        "error": 1,
        "skipped": 1,
        "invalid": 1,
        "not_run": 0,
        "deselected": 0,
        "interrupted": None,
        "duration_s": 0.841,
        "startup_s": 0.0,
        "root_causes": [],  # the run's diagnosis: this run was never diagnosed as a whole
        "ops": {},
    }
    case_keys = {
        "name",
        "file",
        "line",
        "status",
        "expr",
        "message",
        "forward",
        "inputs",
        "nodes",
        "hints",
        "duration_s",
    }
    input_keys = {
        "name",
        "status",
        "reference_shape",
        "engine_shape",
        "max_abs_diff",
        "max_rel_diff",
        "mismatched",
        "size",
        "hints",
    }
    for case in data["cases"]:
        assert case_keys <= case.keys()
        assert isinstance(case["line"], int) and isinstance(case["duration_s"], float)
        for result in case["inputs"]:
            assert input_keys <= result.keys()
            assert all(isinstance(n, int) for n in result["reference_shape"])
            assert isinstance(result["mismatched"], int) and isinstance(result["size"], int)

    failed = data["cases"][1]
    assert failed["forward"] == {**failed["forward"], "status": "passed", "max_abs_diff": 0.0}
    assert failed["hints"][0] == {
        "code": TOP.code,
        "message": TOP.message,
        "fix": TOP.fix,
        "confidence": "exact",
        "op": "matmul",
        "node": "matmul(matmul(x, y), z)",
    }
    assert failed["nodes"] == [
        {"node": "matmul(x, y)", "op": "matmul", "status": "failed", "args": [0, 1], "check": "vjp"}
    ]
    assert failed["inputs"][1]["engine_shape"] == [2, 2, 2]
    assert [h["code"] for h in failed["inputs"][0]["hints"]] == ["nan-mismatch", "transposed"]
    assert failed["tags"] == ["seed"]
    assert data["cases"][3]["forward"] is None


def test_json_maps_non_finite_numbers_to_null(run: RunResult) -> None:
    def reject(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    data = json.loads(to_json(run, tool_version="0.1.0"), parse_constant=reject)
    y = data["cases"][1]["inputs"][1]
    assert y["max_abs_diff"] is None and y["max_rel_diff"] is None
    json.dumps(to_dict(run, tool_version="0.1.0", verbose=True), allow_nan=False)


def test_json_traceback_only_for_errors_and_arrays_only_when_verbose(run: RunResult) -> None:
    cases = to_dict(run, tool_version="0.1.0")["cases"]
    assert [("traceback" in c) for c in cases] == [False, False, True, False, False]
    assert "reference" not in cases[1]["inputs"][0]

    x = to_dict(run, tool_version="0.1.0", verbose=True)["cases"][1]["inputs"][0]
    assert x["reference"] == (np.arange(8.0).reshape(2, 2, 2) + 1).tolist()
    assert x["engine"][1][1][1] is None  # the NaN


# --- JUnit ------------------------------------------------------------------------------


def test_junit_counts_and_elements(run: RunResult) -> None:
    root = ET.fromstring(to_junit(run))
    suite = root.find("testsuite")
    assert suite is not None
    for element in (root, suite):
        assert element.attrib | {"time": "0.841"} == {
            **element.attrib,
            "tests": "5",
            "failures": "1",
            "errors": "2",
            "skipped": "1",
        }
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == [
        "cases.seed",
        "cases.seed",
        "cases.errors",
        "cases.nn",
        "cases.mlp",
    ]
    assert cases[1].get("name") == "seed-[red]batched[/red]-matmul"
    assert cases[0].find("*") is None
    assert cases[2].find("error") is not None and cases[4].find("error") is not None
    skipped = cases[3].find("skipped")
    assert skipped is not None and "logsumexp" in skipped.get("message", "")


def test_junit_failure_explains_with_the_top_hint(run: RunResult) -> None:
    failure = ET.fromstring(to_junit(run)).find(".//failure")
    assert failure is not None
    assert failure.get("message", "").startswith(TOP.code)
    assert TOP.code in failure.text and TOP.fix in failure.text


def test_junit_survives_control_characters_in_tracebacks(run: RunResult) -> None:
    error = ET.fromstring(to_junit(run)).find(".//error")
    assert error is not None and "bad shape" in error.text and "\x1b" not in error.text


@pytest.mark.parametrize(
    ("path", "expected"),
    [("cases/seed.yaml", "cases.seed"), ("./a/b.yml", "a.b"), ("c\\d.yaml", "c.d")],
)
def test_classname(path: str, expected: str) -> None:
    assert classname(path) == expected


# --- rich -------------------------------------------------------------------------------


def test_rich_summary_line_is_pytest_style(run: RunResult) -> None:
    lines = _rich(run).splitlines()
    assert lines[-1] == "1 failed, 1 error, 1 invalid, 1 passed, 1 skipped in 0.84s"


def test_summary_line_leaves_out_zero_counts_and_pluralises_errors() -> None:
    cases = [_error(), _error(), _passed()]
    assert summary_line(RunResult("e", "tf", cases, 1.5)) == "2 errors, 1 passed in 1.50s"
    assert summary_line(RunResult("e", "tf", [], 0.0)) == "no cases ran"
    why = "-k 'zzz' deselected all 3 cases"
    nothing = RunResult("e", "tf", [], 0.0, deselected=3, nothing_found=why)
    assert summary_line(nothing) == f"no cases ran: {why}"
    waited = RunResult("e", "tf", [_passed()], 1.234, deselected=2, startup_s=3.94)
    assert summary_line(waited) == "1 passed, 2 deselected in 1.23s (+3.9s TensorFlow start-up)"


def test_rich_fits_80_columns_without_escape_codes(run: RunResult) -> None:
    for options in ({}, {"verbose": True}):
        text = _rich(run, **options)
        assert not ANSI.search(text)
        assert max(len(line) for line in text.splitlines()) <= 80


def test_rich_prints_user_strings_literally(run: RunResult) -> None:
    text = _rich(run)
    assert "cases/seed.yaml:9::seed-[red]batched[/red]-matmul" in text
    assert "[bold]bad[/bold] shape" in text


def test_rich_one_line_per_passing_case_and_status_lines(run: RunResult) -> None:
    lines = _rich(run).splitlines()
    assert "PASSED  cases/seed.yaml::seed-plain-matmul  0.01s" in lines
    assert "SKIPPED cases/nn.yaml::needs-logsumexp  unsupported: no logsumexp" in lines
    # The message already names file:line, so the location is not repeated.
    assert "INVALID cases/mlp.yaml:7: matmul(h, w2): inner dimensions 4 and 3 differ" in lines


def test_rich_failure_shows_failing_inputs_then_hints_strongest_first(run: RunResult) -> None:
    text = plain_text(run.cases[1])
    assert text.startswith("FAILED  cases/seed.yaml:9::seed-[red]batched[/red]-matmul")
    assert "matmul(matmul(x, y), z)" in text
    assert "(2, 2, 2)" in text and "nan" in text and "5/8" in text
    # Top hint in full first, then the others, then the input's own extra hint.
    positions = [
        text.index(s)
        for s in (TOP.code, "fix", TOP.fix, "transposed", "shape-mismatch", "nan-mismatch")
    ]
    assert positions == sorted(positions)
    # Each hint is shown once: input hints already among the case's hints are not repeated.
    assert text.count("transposed (likely)") == 1
    # The passing forward comparison only appears in verbose mode.
    assert "(forward)" not in text


def test_rich_forward_mismatch_comes_first() -> None:
    case = _failed()
    case.forward = _comparison(np.zeros((2, 2)), np.ones((2, 2)))
    text = plain_text(case)
    assert text.index("(forward)") < text.index(" x ")


def test_rich_error_shows_message_and_traceback_tail(run: RunResult) -> None:
    text = plain_text(run.cases[2])
    assert text.startswith("ERROR   cases/errors.yml:4::engine-raises")
    assert "engine raised ValueError" in text and 'File "my_engine.py", line 12' in text


def test_rich_quiet_prints_only_failures_and_summary(run: RunResult) -> None:
    text = _rich(run, quiet=True)
    assert "PASSED" not in text and "SKIPPED" not in text and "my-engine" not in text
    assert "FAILED" in text and "ERROR" in text and "INVALID" in text
    assert text.splitlines()[-1].startswith("1 failed")


def test_rich_verbose_shows_passing_inputs_and_arrays(run: RunResult) -> None:
    default, verbose = _rich(run), _rich(run, verbose=True)
    # Without -v only a small failing input's arrays are shown: the wrong numbers.
    assert "x arrays" in default and "engine - reference" in default
    assert "arrays" not in default[default.index("PASSED") : default.index("FAILED")]
    assert "nodes checked alone" not in default
    assert "engine - reference" in verbose and "worst at index (0, 0, 1)" in verbose
    assert "[[[1. 2.]" in verbose  # the reference array, printed by numpy
    assert "(forward)" in verbose and "nodes checked alone" in verbose
    # The passing case now lists its inputs too.
    passing = verbose[verbose.index("PASSED") : verbose.index("FAILED")]
    assert " x " in passing and " y " in passing


def test_rich_colour_follows_no_color(run: RunResult, monkeypatch: pytest.MonkeyPatch) -> None:
    def colour_codes() -> list[str]:
        buffer = io.StringIO()
        render(run, Console(file=buffer, width=80, force_terminal=True))
        codes = re.findall(r"\x1b\[([0-9;]*)m", buffer.getvalue())
        return [c for c in codes if re.search(r"(^|;)(3[0-7]|9[0-7]|38)(;|$)", c)]

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert colour_codes()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colour_codes()


# -- mechanisms, folded hints, conventions, small differences --------------------------------

PROBED = Hint(
    code="op-vjp",
    message="sigmoid(x): sigmoid's VJP for argument 0 (x) gives NaN/Inf where exp(-x) "
    "overflows, where the right VJP is finite",
    fix="compute the derivative without overflowing; sigmoid's VJP for x is `g * y * (1 - y)`",
    confidence="exact",
    op="sigmoid",
    node="sigmoid(x)",
    arg=0,
    mechanism="nan-region",
    region="exp(-x) overflows",
    also=[NAN],
)


def _one(case: CaseResult) -> RunResult:
    return RunResult(engine="e", reference="tensorflow 2", cases=[case], duration_s=0.1)


def _probed() -> CaseResult:
    case = _failed()
    case.hints = [PROBED]
    case.inputs[0].hints = [NAN]
    return case


def test_json_hint_carries_mechanism_region_and_what_is_folded_into_it() -> None:
    [hint] = to_dict(_one(_probed()), tool_version="1")["cases"][0]["hints"]
    assert (hint["mechanism"], hint["region"], hint["arg"]) == (
        "nan-region",
        "exp(-x) overflows",
        0,
    )
    assert hint["also"] == [{"code": "nan-mismatch", "message": NAN.message}]


def test_rich_top_hint_shows_mechanism_and_folded_hints_once() -> None:
    out = _rich(_one(_probed()))
    assert "mechanism nan-region where exp(-x) overflows" in " ".join(out.split())
    assert "seen as nan-mismatch" in out
    assert out.count(NAN.message) == 0  # folded: named in `also`, not repeated per input


def test_rich_prints_small_differences_legibly() -> None:
    reference = np.array([[1.0, 2.0], [3.0, 4.0]])
    engine = reference + np.array([[1e-7, 0.0], [-2e-8, 0.0]])
    case = _failed()
    case.inputs = [InputResult("x", _comparison(reference, engine))]
    out = _rich(_one(case))
    difference = out.split("engine - reference", 1)[1]
    assert re.search(r"\b1\.0*e-07", difference) and re.search(r"-2\.0*e-08", difference)
    assert not re.search(r"-0\.(\s|\])", difference)  # never `0.`/`-0.` for them


def test_rich_passing_case_shows_its_convention_note() -> None:
    note = Hint("convention", "x passes under the engine's declared conventions: …", "nothing",
                "exact")  # fmt: skip
    case = _passed()
    case.inputs[0].hints = [note]
    out = _rich(_one(case))
    assert "convention: x passes under the engine's declared conventions" in out


def test_rich_error_shows_its_diagnosis() -> None:
    case = _error()
    case.hints = [PROBED]
    assert "mechanism nan-region" in " ".join(_rich(_one(case)).split())
