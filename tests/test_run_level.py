"""The run as a whole (SPEC §6.2): root causes across cases, the report card, the cost of
`--diagnose=first`, and how each report format carries them.

The planted bug is the seed question's unbroadcast (leading axes only: the catalogue's
`broadcast.leading-only` in the builtin engine) over the shipped broadcasting cases, and
the corpus's closure engine with the same bug over the whole suite; the report card's
counts are recomputed here from the per-case results, not from the card's own code.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from corpus import ROOT
from gradcheck.cases import load_file, load_paths
from gradcheck.cli import app, bare_diagnose
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.diagnosis.run.root_causes import key
from gradcheck.engines.loading import load_engine
from gradcheck.ops import all_ops
from gradcheck.report import to_github, to_junit
from gradcheck.results import RunResult
from gradcheck.runner import RunOptions, run

LEADING_ONLY = f"{ROOT}/tests/corpus/closure_bugs.py:BroadcastLeadingOnly"
PLANTED = f"{ROOT}/tests/planted_engines.py:LeadingOnly"  # the catalogue's fault, as a file
BROADCASTING = ROOT / "cases" / "broadcasting.yaml"


def leading_only() -> FaultyEngine:
    return FaultyEngine(FAULTS["broadcast.leading-only"])


@pytest.fixture(scope="module")
def broadcasting() -> RunResult:
    return run(load_paths([BROADCASTING]), leading_only, RunOptions())


def failing_ids(result: RunResult) -> list[str]:
    return [c.id for c in result.cases if c.status in ("failed", "error")]


# -- root causes -----------------------------------------------------------------------


def test_one_planted_unbroadcast_bug_is_one_root_cause_covering_every_failing_case(broadcasting):
    assert failing_ids(broadcasting)
    [cause] = broadcasting.root_causes
    assert cause.hint.code == "fault:broadcast.leading-only"
    assert cause.cases == failing_ids(broadcasting)
    for case in broadcasting.cases:  # and each failing case now leads with it
        if case.status == "failed":
            assert case.hints[0].code == cause.hint.code, case.name


def pair(tmp_path: Path, *, leading_second: bool = True) -> list:
    """Two cases: a (3,1) column against (3,4), where leading-only and no-reduce agree, and
    one where the column also meets a leading axis, which only leading-only reproduces."""
    column = {
        "name": "column",
        "expr": "a + b",
        "inputs": {"a": {"shape": [3, 1]}, "b": {"shape": [3, 4]}},
    }
    leading = {
        "name": "leading",
        "expr": "a + b",
        "inputs": {"a": {"shape": [3, 1]}, "b": {"shape": [2, 3, 4]}},
    }
    cases = [column, leading] if leading_second else [leading, column]
    path = tmp_path / "pair.yaml"
    path.write_text(yaml.safe_dump({"defaults": {"cotangent": "random"}, "cases": cases}))
    return load_file(path)


@pytest.mark.parametrize("diagnose", ["first", "all"])
@pytest.mark.parametrize(
    ("planted", "rival"),
    [
        ("broadcast.leading-only", "broadcast.no-reduce"),
        ("broadcast.no-reduce", "broadcast.leading-only"),
    ],
)
def test_the_second_case_decides_between_two_faults_the_first_cannot_tell_apart(
    tmp_path, diagnose, planted, rival
):
    cases = pair(tmp_path)
    alone = run(cases[:1], lambda: FaultyEngine(FAULTS[planted]), RunOptions())
    [only] = alone.root_causes
    assert {r.label for r in only.rivals} | {only.hint.code} == {
        f"fault:{planted}",
        f"fault:{rival}",
    }
    assert all(r.ruled_out_by is None for r in only.rivals)  # nothing tells them apart
    both = run(cases, lambda: FaultyEngine(FAULTS[planted]), RunOptions(diagnose=diagnose))
    [cause] = both.root_causes
    assert cause.hint.code == f"fault:{planted}"
    assert cause.cases == [c.id for c in both.cases]
    [decided] = cause.rivals
    assert (decided.label, decided.ruled_out_by) == (f"fault:{rival}", both.cases[1].id)
    assert both.cases[0].hints[0].code == f"fault:{planted}"  # the first case cites it


def test_the_deciding_case_may_come_first(tmp_path):
    cases = pair(tmp_path, leading_second=False)
    result = run(cases, lambda: FaultyEngine(FAULTS["broadcast.leading-only"]), RunOptions())
    [cause] = result.root_causes
    assert cause.hint.code == "fault:broadcast.leading-only"
    assert cause.cases == [c.id for c in result.cases]


SHARED_UNBROADCAST = ["sub_both_broadcast", "maximum_minimum_broadcast", "broadcast_to"]


@pytest.mark.parametrize(
    ("planted", "fault"),
    [
        *(("builtin", name) for name in ("leading-only", "no-reduce", "leading-kept")),
        ("closure_bugs.py:BroadcastLeadingOnly", "leading-only"),
        ("closure_bugs.py:SendWithoutUnbroadcast", "no-reduce"),
        ("tape_bugs.py:BroadcastNoReduce", "no-reduce"),
        ("tape_bugs.py:BroadcastLeadingKept", "leading-kept"),
    ],
)
def test_one_wrong_unbroadcast_under_binary_ops_and_broadcast_to_is_one_root_cause(planted, fault):
    """broadcast_to's gradient is summed back by the same unbroadcast as the binary ops':
    in the builtin engine with the fault planted, and in the corpus engines, whose
    broadcast_to hands its share to their own (wrong) unbroadcast. One cause, not two."""
    cases = [c for c in load_paths([BROADCASTING]) if c.name in SHARED_UNBROADCAST]
    builtin = partial(FaultyEngine, FAULTS[f"broadcast.{fault}"])
    factory = builtin if planted == "builtin" else load_engine(f"{ROOT}/tests/corpus/{planted}")
    result = run(cases, factory, RunOptions())
    assert failing_ids(result) == [c.id for c in result.cases]  # broadcast_to's too
    [cause] = result.root_causes
    assert cause.hint.code == f"fault:broadcast.{fault}"
    assert cause.cases == failing_ids(result)
    assert all(c.hints[0].code == cause.hint.code for c in result.cases)


def test_two_bugs_are_two_root_causes(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "defaults": {"cotangent": "random"},
                "cases": [
                    {"name": "sig", "expr": "sigmoid(x)", "inputs": {"x": {"shape": [4]}}},
                    {"name": "tanh", "expr": "tanh(x)", "inputs": {"x": {"shape": [4]}}},
                    {
                        "name": "sig2",
                        "expr": "sigmoid(x) * y",
                        "inputs": {"x": {"shape": [4]}, "y": {"shape": [4]}},
                    },
                ],
            }
        )
    )
    engine = f"{ROOT}/tests/corpus/closure_bugs.py:TanhFromInput"
    result = run(load_file(path), load_engine(engine), RunOptions())
    [cause] = result.root_causes  # sigmoid passes in that engine
    assert cause.hint.code == "fault:tanh.from-input" and cause.cases == [result.cases[1].id]
    planted = "tests/corpus/tfop_bugs.py:SigmoidFromInput"
    both = run(load_file(path), load_engine(f"{ROOT}/{planted}"), RunOptions())
    assert [c.hint.code for c in both.root_causes] == ["fault:sigmoid.from-input"]
    assert both.root_causes[0].cases == [both.cases[0].id, both.cases[2].id]


def test_an_error_the_runs_cause_raises_too_joins_its_group():
    shipped = load_paths([ROOT / "cases"])
    result = run(shipped, lambda: FaultyEngine(FAULTS["broadcast.leading-only"]), RunOptions())
    errors = [c for c in result.cases if c.status == "error"]
    assert errors
    [cause] = result.root_causes
    assert cause.cases == failing_ids(result)
    for case in errors:
        assert case.hints[0].confidence == "likely"
        assert "raises on this case too" in case.hints[0].message


# -- the report card -------------------------------------------------------------------


def test_report_card_counts_agree_with_the_per_case_results(broadcasting):
    closure = run(load_paths([ROOT / "cases"]), load_engine(LEADING_ONLY), RunOptions())
    for result in (broadcasting, closure):
        used = {c.id: {n.op for n in c.graph if n.op} for c in result.cases}
        for op, record in result.ops.items():
            using = [c for c in result.cases if op in used[c.id]]
            passed = [c for c in using if c.status == "passed"]
            failing = [c for c in using if c.status in ("failed", "error")]
            wrong = [
                c
                for c in failing
                if any(n.op == op and n.status in ("failed", "error") for n in c.nodes)
                or (c.hints and c.hints[0].op == op)
            ]
            lacking = [c for c in result.cases if op in c.unsupported_ops]
            assert record.passed == len(passed), op
            assert (record.failed, record.failed_elsewhere) == (
                len(wrong),
                len(failing) - len(wrong),
            ), op
            assert record.unsupported == len(lacking), op
            assert sum(record.mechanisms.values()) <= record.failed
    assert closure.ops["concat"].unsupported > 0  # the closure engine has no concat
    assert broadcasting.ops["add"].mechanisms == {"fault:broadcast.leading-only": 1}


def test_gradcheck_ops_engine_lists_what_a_partial_engine_lacks():
    runner = CliRunner()
    engine = f"{ROOT}/tests/corpus/closure_engine.py"
    result = runner.invoke(app, ["ops", "--engine", engine], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    # The summary, unwrapped: it runs past the 200 columns now
    last = " ".join(result.output[result.output.rindex(f"engine {engine} implements") :].split())
    # SPEC §3's ops but concat and stack, none of §3.1's: listed in the registry's order
    closure = load_engine(engine)()
    lacks = [op.name for op in all_ops() if not callable(getattr(closure, op.name, None))]
    assert {"concat", "stack", "take", "cumsum"} <= set(lacks)
    assert last.startswith(f"engine {engine} implements 33 of {33 + len(lacks)} ops")
    assert last.endswith(f"lacks: {', '.join(lacks)}")
    rows = {line.split()[0]: line.split() for line in result.output.splitlines() if line.strip()}
    assert "missing" in rows["concat([values,"] and "yes" in rows["add(a,"]


def test_gradcheck_ops_engine_says_what_a_scaffold_only_stubs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["init-engine", "mine.py"]).exit_code == 0
    result = runner.invoke(app, ["ops", "--engine", "mine.py"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    n = len(list(all_ops()))
    assert f"implements 0 of {n} ops; stubs that raise NotImplementedError: add" in result.output
    assert "no working leaf, value, grad yet" in result.output


# -- --diagnose=first ------------------------------------------------------------------


class Counted(FaultyEngine):
    """The builtin engine with broadcast.leading-only, counting the instances made."""

    made = 0

    def __init__(self) -> None:
        type(self).made += 1
        super().__init__(FAULTS["broadcast.leading-only"])


def test_first_spares_later_cases_the_probes_and_finds_the_same_root_causes():
    cases = load_paths([BROADCASTING])
    made = {}
    results = {}
    for mode in ("all", "first"):
        Counted.made = 0
        results[mode] = run(cases, Counted, RunOptions(diagnose=mode))
        made[mode] = Counted.made
    first, full = results["first"], results["all"]
    assert [key(c.hint) for c in first.root_causes] == [key(c.hint) for c in full.root_causes]
    assert [c.cases for c in first.root_causes] == [c.cases for c in full.root_causes]
    brief = [c for c in first.cases if "diagnosed in brief" in c.message]
    assert len(brief) == len(failing_ids(first)) - 1  # all but the first failing case
    assert not any("diagnosed in brief" in c.message for c in full.cases)
    for case in brief:  # only the nodes of the fault's ops were checked, and not probed
        assert {n.op for n in case.nodes} <= FAULTS["broadcast.leading-only"].ops
    assert made["first"] < made["all"]


def test_bare_diagnose_is_first_and_both_spellings_parse():
    assert bare_diagnose(["--diagnose", "cases"]) == ["--diagnose=first", "cases"]
    assert bare_diagnose(["--diagnose"]) == ["--diagnose=first"]
    assert bare_diagnose(["--diagnose", "all"]) == ["--diagnose", "all"]
    assert bare_diagnose(["--", "--diagnose"]) == ["--", "--diagnose"]


@pytest.mark.parametrize(
    ("flags", "brief"),
    [
        ([], True),
        (["--diagnose"], True),
        (["--diagnose=all"], False),
        (["--diagnose", "all"], False),
        (["--diagnose", "first"], True),
        (["--no-diagnose"], None),
    ],
)
def test_the_diagnose_option(tmp_path, flags, brief):
    result = CliRunner().invoke(
        app,
        ["run", str(BROADCASTING), *flags, "--engine", PLANTED, "-f", "json", "--no-cache"],
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    messages = " ".join(c["message"] for c in report["cases"])
    if brief is None:
        assert report["summary"]["root_causes"] == []
        assert not any(c["hints"] for c in report["cases"])
    else:
        assert ("diagnosed in brief" in messages) == brief
        [cause] = report["summary"]["root_causes"]
        assert cause["hint"]["code"] == "fault:broadcast.leading-only"


def test_a_bad_diagnose_value_is_a_usage_error():
    result = CliRunner().invoke(app, ["run", str(BROADCASTING), "--diagnose=some"])
    assert result.exit_code == 2


# -- the report formats ----------------------------------------------------------------


def test_json_summary_has_the_root_causes_and_the_ops(broadcasting):
    summary = json.loads(json.dumps(broadcasting.summary))
    [cause] = summary["root_causes"]
    assert cause["hint"]["code"] == "fault:broadcast.leading-only"
    assert cause["cases"] == failing_ids(broadcasting)
    assert cause["rivals"][0]["label"] == "fault:broadcast.no-reduce"
    assert summary["ops"]["add"]["passed"] == broadcasting.ops["add"].passed
    assert set(summary["ops"]["add"]) == {
        "passed",
        "failed",
        "failed_elsewhere",
        "unsupported",
        "mechanisms",
    }


def test_junit_and_github_carry_the_root_cause_in_the_failure_text(broadcasting):
    n = len(failing_ids(broadcasting))
    said = f"root cause 1 of the run (fault:broadcast.leading-only), shared by {n} failing cases"
    failures = ET.fromstring(to_junit(broadcasting).split("?>", 1)[1]).iter("failure")
    for failure in failures:
        text = " ".join((failure.text or "").split())  # the report's lines are wrapped
        assert said in failure.get("message", "") and said in text
    annotations = to_github(broadcasting).splitlines()
    assert len(annotations) == n and all(said in line for line in annotations)


def test_rich_report_ends_with_the_run_diagnosis_and_the_card_in_80_columns():
    args = ["run", str(BROADCASTING), "--engine", PLANTED, "--no-cache"]
    full = CliRunner().invoke(app, args, env={"COLUMNS": "80", "NO_COLOR": "1"}).output
    diagnosis = full[full.index("run diagnosis:") :]
    assert "1 root cause" in diagnosis.splitlines()[0]
    assert "decided by" in diagnosis and "fault:broadcast.no-reduce" in diagnosis
    card = full[full.index("report card:") :].splitlines()
    assert all(len(line.rstrip()) <= 80 for line in card)
    assert any(line.split()[:1] == ["add"] for line in card)
    quiet = CliRunner().invoke(app, [*args, "-q"], env={"COLUMNS": "80"}).output
    assert "run diagnosis:" in quiet and "report card:" not in quiet


def test_first_spares_a_case_the_node_checks_where_the_runs_driver_cause_locates_it():
    cases = [c for c in load_file(ROOT / "tests/corpus/cases/backprop.yaml")]
    engine = load_engine(f"{ROOT}/tests/corpus/tape_bugs.py:OverwriteAtFanOut")
    first = run(cases, engine, RunOptions(diagnose="first"))
    full = run(cases, engine, RunOptions(diagnose="all"))
    brief = [c for c in first.cases if "diagnosed in brief" in c.message]
    assert brief and all("backprop-driver [no-accumulate]" in c.message for c in brief)
    by_id = {c.id: c for c in full.cases}
    for case in brief:  # the same hint as in full, with only the node's consumers checked
        whole = by_id[case.id]
        assert (case.hints[0].mechanism, case.hints[0].node) == (
            whole.hints[0].mechanism,
            whole.hints[0].node,
        )
        assert len(case.nodes) < len(whole.nodes)


def test_the_python_api_takes_both_modes_and_reports_the_run_as_a_whole():
    import gradcheck
    from gradcheck.errors import UsageError

    for mode in ("first", "all", True):
        report = gradcheck.run(BROADCASTING, engine=PLANTED, diagnose=mode)
        [cause] = report.root_causes
        assert cause.hint.code == "fault:broadcast.leading-only"
        assert report.summary["ops"]["add"]["passed"] == report.ops["add"].passed
    with pytest.raises(UsageError):
        gradcheck.run(BROADCASTING, engine=PLANTED, diagnose="some")
