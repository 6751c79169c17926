"""The command line (SPEC §5, §7) driven through typer's CliRunner.

Every test runs in its own folder holding links to the shipped `cases/` and
`examples/`, so paths in reports read as a user would type them (`cases/seed.yaml`)
and nothing a run writes lands in the repository. The question's engine (`examples/seed_engine.py`,
matmul only, float32 only) provides failures and unsupported cases on demand.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from importlib.metadata import version as dist_version
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

import gradcheck
from gradcheck.cli import app
from gradcheck.diagnosis.faults.planted import CATALOGUE
from gradcheck.ops import all_ops
from spec_contract import SPEC_FAULTS

ROOT = Path(__file__).resolve().parents[1]
SEED_ENGINE = "examples/seed_engine.py"
# Wide enough that rich never folds a table row (an op's signature and its TF name
# stay on one line), and no terminal, so no escape codes unless a test asks for them.
ENV = {"COLUMNS": "240", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
ANSI = re.compile(r"\x1b\[")
# The totals, then the one-off start-up when this process imported TensorFlow for the run.
STARTUP = r"(?: \(\+\d+\.\ds TensorFlow start-up\))?"
SUMMARY = re.compile(rf"^(?:\d+ \w+, )*\d+ \w+ in \d+\.\d\ds{STARTUP}$")


def sandbox(directory: Path) -> Path:
    """`directory` with the shipped cases and examples linked in, as the cwd of a run.

    Runs see `cases/seed.yaml` exactly as a user in the repository would, while
    anything a run leaves in its cwd (the reference cache) stays out of the repository.
    """
    for name in ("cases", "examples"):
        (directory / name).symlink_to(ROOT / name, target_is_directory=True)
    return directory


@pytest.fixture(autouse=True)
def _in_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(sandbox(tmp_path))


def invoke(*args: str | os.PathLike[str], env: dict[str, str | None] | None = None):
    result = CliRunner().invoke(app, [str(a) for a in args], env={**ENV, **(env or {})})
    # A crash inside a command is a bug, never an exit code to compare.
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def run_json(*args: str | os.PathLike[str]) -> tuple[int, dict]:
    result = invoke("run", "--format", "json", *args)
    return result.exit_code, json.loads(result.stdout)


def summary_line(stdout: str) -> str:
    return [line for line in stdout.splitlines() if line.strip()][-1].strip()


def shipped_case_files() -> list[Path]:
    return sorted(p for p in (ROOT / "cases").rglob("*") if p.suffix in (".yaml", ".yml"))


def shipped_cases() -> list[tuple[str, int, str]]:
    """(file, line, name) of every shipped case, read with PyYAML, not the loader."""
    found = []
    for path in shipped_case_files():
        root = yaml.compose(path.read_text())
        top = {key.value: value for key, value in root.value}
        for node in top["cases"].value:
            fields = {key.value: value for key, value in node.value}
            line = node.start_mark.line + 1
            found.append((path.relative_to(ROOT).as_posix(), line, fields["name"].value))
    return found


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# Two cases the seed engine gets wrong (batched matmul), one it cannot run (exp).
SEED_SUITE = """
cases:
  - name: batched_a
    expr: matmul(x, y)
    dtype: float32
    inputs:
      x: [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]
      y: [[1.0, -1.0], [2.0, 0.5]]
  - name: batched_b
    expr: matmul(x, y)
    dtype: float32
    inputs:
      x: [[[2.0, 1.0], [0.0, 4.0]], [[1.0, 3.0], [2.0, 2.0]]]
      y: [[[1.0, 0.0], [2.0, 1.0]], [[0.5, 1.0], [1.0, 3.0]]]
  - name: uses_exp
    expr: exp(x)
    dtype: float32
    inputs:
      x: [0.5, 1.5]
"""

# Line numbers below are the YAML's (1-based): bad_one's mapping starts on line 7,
# its offending expr sits on line 8.
MIXED = """
cases:
  - name: good_one
    expr: x * y
    inputs:
      x: [1.0, 2.0]
      y: [3.0, 4.0]
  - name: bad_one
    expr: matmul(x, y)
    inputs:
      x: [[1.0, 2.0]]
      y: [[1.0, 2.0, 3.0]]
  - name: good_two
    expr: exp(x)
    inputs:
      x: [0.5, 1.5]
"""
BAD_LINES = {7, 8}


@pytest.fixture
def seed_suite(tmp_path: Path) -> Path:
    return write(tmp_path / "suite" / "seed_suite.yaml", SEED_SUITE)


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    return write(tmp_path / "mixed.yaml", MIXED)


# --- commands that need no TensorFlow ---------------------------------------------------


def test_version_prints_package_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"gradcheck {gradcheck.__version__}"
    assert gradcheck.__version__ == dist_version("gradcheck")


def test_ops_lists_every_op_with_its_tensorflow_mapping():
    narrow = invoke("ops", env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.stderr
    assert "…" not in narrow.stdout  # long signatures wrap at words, never cut
    result = invoke("ops", env={"COLUMNS": "400"})  # each row on one line
    lines = result.stdout.splitlines()
    ops = list(all_ops())
    assert len(ops) >= 30
    for op in ops:
        assert any(op.signature in line and op.tf_name in line for line in lines), op.name


@pytest.mark.parametrize("mode", ["rev", "fwd"])
@pytest.mark.parametrize("spelling", ["numpy", "tensorflow", "torch", "jax"])
def test_ops_shows_every_vjp_rule_in_the_spelling_asked_for(spelling, mode):
    assert "VJP" not in invoke("ops").stdout  # the rules only when asked for
    forward = ["--forward"] if mode == "fwd" else []
    # Wide enough that no cell wraps (a pool's rule is a few hundred characters): a row's
    # cells, wrapped beside each other, would interleave in the flattened text.
    result = invoke("ops", "--spelling", spelling, *forward, env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.stderr
    assert ("JVP (" in result.stdout) == (mode == "fwd")
    flat = " ".join(result.stdout.split())
    for op in all_ops():
        rule = op.rule(len(op.params) - 1, spelling, mode)
        assert " ".join(rule.split()).replace(" ", "") in flat.replace(" ", ""), op.name


def test_docs_ops_md_is_what_gradcheck_ops_markdown_writes():
    result = invoke("ops", "--markdown")
    assert result.exit_code == 0, result.stderr
    assert (ROOT / "docs" / "ops.md").read_text() == result.stdout
    assert "tf.matmul(g, b, transpose_b=True)" in result.stdout


def test_faults_lists_every_catalogue_entry():
    result = invoke("faults")
    assert result.exit_code == 0, result.stderr
    codes = {fault.code for fault in CATALOGUE}
    for code in codes:
        assert code in result.stdout
    assert {f"fault:{name}" for name in SPEC_FAULTS} <= codes
    flat = " ".join(result.stdout.split())
    for fault in CATALOGUE:  # where a public report of the bug class is known, it is shown
        if fault.seen:
            assert f"seen: {fault.seen}" in flat, fault.name


def test_schema_is_a_draft_2020_12_schema_that_every_shipped_case_file_satisfies():
    result = invoke("schema")
    assert result.exit_code == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    files = shipped_case_files()
    assert files
    for path in files:
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, f"{path}: {errors}"
    # Not a schema that accepts anything: a case without name or inputs is rejected.
    assert not validator.is_valid({"cases": [{"expr": "x * 2"}]})


def test_list_prints_file_line_name_for_every_case():
    result = invoke("list", "cases")
    assert result.exit_code == 0, result.stderr
    expected = shipped_cases()
    listed = [line.split()[0] for line in result.stdout.splitlines() if "::" in line]
    assert listed == [f"{file}:{line}::{name}" for file, line, name in expected]
    assert summary_line(result.stdout) == f"{len(expected)} cases"
    # No paths: cases/ is the default.
    assert invoke("list").stdout == result.stdout


def test_list_never_breaks_a_case_id_longer_than_the_terminal(tmp_path: Path):
    """A case id copied from the terminal must work as typed: it runs long, never wrapped
    (a wrap at `::` once put a zero-width space between the colons)."""
    folder = tmp_path / ("a_folder_whose_name_is_long_" * 3)
    folder.mkdir()
    write(folder / "cases.yaml", "cases:\n  - name: product\n    expr: x * y\n"
          "    inputs: {x: [1.0], y: [2.0]}\n")  # fmt: skip
    result = invoke("list", folder, env={"COLUMNS": "40"})
    assert result.exit_code == 0, result.stderr
    case_id = f"{folder / 'cases.yaml'}:2::product"
    assert case_id in result.stdout.splitlines()[0]
    assert "\u200b" not in result.stdout


def test_list_reports_invalid_cases_on_stderr_and_exits_2(mixed: Path):
    result = invoke("list", mixed)
    assert result.exit_code == 2
    assert f"{mixed}:2::good_one" in result.stdout
    assert f"{mixed}:12::good_two" in result.stdout
    problems = [line for line in result.stderr.splitlines() if line.startswith("INVALID")]
    assert len(problems) == 1  # one invalid case; its problem's text may wrap below
    where = "|".join(map(str, BAD_LINES))
    assert re.match(rf"INVALID {re.escape(str(mixed))}:({where}):", problems[0])
    assert "inner dimensions" in " ".join(result.stderr.split())
    assert "bad_one" not in result.stdout


def test_light_commands_never_import_tensorflow():
    script = textwrap.dedent(
        """
        import sys
        from typer.testing import CliRunner
        from gradcheck.cli import app

        for args in (["--version"], ["list", "cases"], ["ops"], ["schema"]):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, (args, result.output)
            assert "tensorflow" not in sys.modules, args
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_run_that_needs_no_tensorflow_never_starts_its_import(tmp_path: Path):
    """Issue 24: cases all invalid, deselected, numeric or cached never wait for TensorFlow's
    import (it took 11 s and more before a one-line verdict)."""
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(
        "cases:\n  - name: bad\n    expr: nosuchop(x)\n    inputs: {x: {shape: [3]}}\n"
    )
    numeric = tmp_path / "numeric.yaml"
    numeric.write_text(
        "cases:\n  - name: num\n    expr: sin(x)\n    reference: numeric\n"
        "    dtype: float64\n    inputs: {x: {shape: [3]}}\n"
    )
    script = textwrap.dedent(
        f"""
        import sys
        from typer.testing import CliRunner
        from gradcheck.cli import app
        from gradcheck.runner import references

        cache = ["--cache-dir", {str(tmp_path / "c")!r}]
        for args, code in (
            (["run", {str(invalid)!r}], 2),
            (["run", {str(numeric)!r}, "-k", "nothing"], 5),
            (["run", {str(numeric)!r}, *cache], 0),
        ):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == code, (args, result.output)
            assert references._import is None, args
            assert "tensorflow" not in sys.modules, args
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_first_commands_import_only_what_they_print():
    """Start-up (issue 9): none imports NumPy (list reads the shipped cases, literal
    arrays and pinned gradients among them, and checks their shapes; ops reads the op
    declarations) nor a report format it does not print, nor Pydantic (typer >= 0.29
    imports it for any option)."""
    script = textwrap.dedent(
        """
        import sys
        from typer.testing import CliRunner
        from gradcheck.cli import app

        never = (
            "numpy", "pydantic", "gradcheck.report.html_report", "gradcheck.report.junit_report"
        )
        for args in (["--version"], ["check", "--help"], ["list", "cases"], ["ops"]):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, (args, result.output)
            assert not [name for name in never if name in sys.modules], args
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# --- run: selection and verbosity -------------------------------------------------------


def test_run_shipped_cases_all_pass():
    result = invoke("run", "cases/")
    assert result.exit_code == 0, result.stdout
    expected = len(shipped_cases())
    line = summary_line(result.stdout)
    assert SUMMARY.match(line), line
    assert line.startswith(f"{expected} passed in ")
    assert sum(line.startswith("PASSED") for line in result.stdout.splitlines()) == expected


def test_quiet_prints_no_passed_lines_but_the_summary():
    loud = invoke("run", "cases/elementwise.yaml")
    quiet = invoke("run", "-q", "cases/elementwise.yaml")
    assert loud.exit_code == quiet.exit_code == 0
    assert "PASSED" in loud.stdout
    assert "PASSED" not in quiet.stdout
    count = int(summary_line(loud.stdout).split()[0])
    assert summary_line(quiet.stdout).startswith(f"{count} passed in ")


def test_k_selects_cases_by_name():
    total = len(shipped_cases())
    code, report = run_json("cases/", "-k", "matmul")
    assert code == 0
    assert 0 < len(report["cases"]) < total
    for case in report["cases"]:
        assert "matmul" in case["name"] or "matmul" in case["tags"], case["name"]
    assert report["summary"]["passed"] == len(report["cases"])

    code, report = run_json("cases/", "-k", "seed_batched_matmul_chain")
    assert [case["name"] for case in report["cases"]] == ["seed_batched_matmul_chain"]


def test_fail_fast_stops_at_the_first_failure(seed_suite: Path):
    code, everything = run_json(seed_suite, "-e", SEED_ENGINE)
    assert code == 1
    assert everything["summary"]["failed"] == 2

    code, stopped = run_json(seed_suite, "-e", SEED_ENGINE, "-x")
    assert code == 1
    names = [c["name"] for c in everything["cases"]]
    assert [c["name"] for c in stopped["cases"]] == names  # the rest listed, as not run
    assert [c["status"] for c in stopped["cases"]] == ["failed"] + ["not run"] * (len(names) - 1)
    assert "-x" in stopped["cases"][1]["message"]
    assert stopped["summary"]["failed"] == 1
    assert stopped["summary"]["not_run"] == len(names) - 1

    rich = invoke("run", seed_suite, "-e", SEED_ENGINE, "--fail-fast")
    assert rich.exit_code == 1
    assert "batched_a" in rich.stdout and "batched_b" not in rich.stdout  # no NOT RUN lines
    assert summary_line(rich.stdout).startswith(f"1 failed, {len(names) - 1} not run in ")
    assert summary_line(rich.stdout).endswith(": -x stopped the run at the first failure")


def test_verbose_shows_arrays_of_passing_cases(tmp_path: Path):
    case = write(
        tmp_path / "one.yaml",
        """
        cases:
          - name: exp_pair
            expr: exp(x)
            cotangent: ones
            inputs:
              x: [0.5, 1.5]
        """,
    )
    plain = invoke("run", case)
    verbose = invoke("run", case, "-v")
    assert plain.exit_code == verbose.exit_code == 0
    # exp(1.5) = 4.4817 is both the forward value and x's gradient.
    assert "4.4817" in verbose.stdout and "x arrays" in verbose.stdout
    assert "(forward)" in verbose.stdout
    assert "4.4817" not in plain.stdout and "x arrays" not in plain.stdout

    _, report = run_json(case, "-v")
    (x,) = report["cases"][0]["inputs"]
    assert x["engine"] == pytest.approx([1.6487212707, 4.4816890703])
    assert x["reference"] == pytest.approx(x["engine"])
    _, terse = run_json(case)
    assert "engine" not in terse["cases"][0]["inputs"][0]


# --- run: report formats --------------------------------------------------------------


def test_json_report_has_every_spec_key(seed_suite: Path):
    code, report = run_json(seed_suite, "-e", SEED_ENGINE)
    assert code == 1
    assert {"tool", "version", "engine", "reference", "summary", "cases"} <= set(report)
    assert report["tool"] == "gradcheck"
    assert report["version"] == gradcheck.__version__
    assert report["engine"] == "seed-engine"
    assert report["reference"].startswith("tensorflow 2.")
    summary = report["summary"]
    statuses = ("passed", "failed", "error", "skipped", "invalid")
    assert set(summary) >= {*statuses, "duration_s"}
    assert sum(summary[s] for s in statuses) == len(report["cases"]) == 3
    assert (summary["failed"], summary["skipped"]) == (2, 1)

    case_keys = {"name", "file", "line", "status", "expr", "message", "forward", "inputs"}
    case_keys |= {"nodes", "hints", "duration_s"}
    input_keys = {"name", "status", "reference_shape", "engine_shape", "max_abs_diff"}
    input_keys |= {"max_rel_diff", "mismatched", "size", "hints"}
    failed = [c for c in report["cases"] if c["status"] == "failed"]
    assert len(failed) == 2
    for case in report["cases"]:
        assert case_keys <= set(case), case["name"]
        assert case["file"] == str(seed_suite)
        assert isinstance(case["line"], int) and case["line"] > 0
        assert case["status"] in statuses
    for case in failed:
        assert case["forward"]["status"] == "passed"
        assert isinstance(case["forward"]["max_abs_diff"], float)
        assert case["hints"], case["name"]
        for hint in case["hints"]:
            assert {"code", "message", "fix", "confidence"} <= set(hint)
            assert hint["confidence"] in ("exact", "likely", "possible")
        for item in case["inputs"]:
            assert input_keys <= set(item)
            assert item["status"] in ("passed", "failed")
            assert item["size"] == (8 if len(item["reference_shape"]) == 3 else 4)
            for hint in item["hints"]:
                assert {"code", "message", "fix", "confidence"} <= set(hint)
        for node in case["nodes"]:
            assert {"node", "op", "status", "args"} <= set(node)
    assert any(item["hints"] for case in failed for item in case["inputs"])
    assert any(case["nodes"] for case in failed)


def test_junit_report_has_one_testcase_per_case(seed_suite: Path):
    result = invoke("run", seed_suite, "-e", SEED_ENGINE, "--format", "junit")
    assert result.exit_code == 1
    root = ET.fromstring(result.stdout.encode())
    testcases = root.findall(".//testcase")
    assert [t.get("name") for t in testcases] == ["batched_a", "batched_b", "uses_exp"]
    outcome = {t.get("name"): [child.tag for child in t] for t in testcases}
    assert outcome == {"batched_a": ["failure"], "batched_b": ["failure"], "uses_exp": ["skipped"]}
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "2", "1")


@pytest.mark.parametrize("fmt", ["json", "junit", "rich"])
def test_output_writes_the_report_and_the_terminal_keeps_the_rich_one(
    seed_suite: Path, tmp_path: Path, fmt: str
):
    reports = tmp_path / "reports"
    reports.mkdir()
    target = reports / f"report.{fmt}"
    target.write_text("stale")
    result = invoke("run", seed_suite, "-e", SEED_ENGINE, "--format", fmt, "--output", target)
    assert result.exit_code == 1
    # The terminal still gets the rich report, not the file's format.
    assert summary_line(result.stdout).startswith("2 failed, 1 skipped in ")
    assert "FAILED" in result.stdout
    assert not result.stdout.lstrip().startswith(("{", "<"))
    # Written atomically: the file replaced, no temporary file left beside it.
    assert sorted(os.listdir(reports)) == [target.name]
    text = target.read_text()
    if fmt == "json":
        assert json.loads(text)["summary"]["failed"] == 2
    elif fmt == "junit":
        assert len(ET.fromstring(text.encode()).findall(".//testcase")) == 3
    else:
        assert "FAILED" in text and "batched_b" in text
        assert summary_line(text).startswith("2 failed, 1 skipped in ")
        assert not ANSI.search(text)


# --- run: options that change outcomes --------------------------------------------------


def test_strict_fails_unsupported_cases(seed_suite: Path):
    code, lenient = run_json(seed_suite, "-e", SEED_ENGINE, "-k", "uses_exp")
    assert code == 0
    assert [c["status"] for c in lenient["cases"]] == ["skipped"]
    assert "exp" in lenient["cases"][0]["message"]

    code, strict = run_json(seed_suite, "-e", SEED_ENGINE, "-k", "uses_exp", "--strict")
    assert code == 1
    assert [c["status"] for c in strict["cases"]] == ["failed"]
    assert "exp" in strict["cases"][0]["message"]


@pytest.mark.parametrize("override", [["--atol", "1000"], ["--rtol", "10"]])
def test_tolerance_overrides(seed_suite: Path, override: list[str]):
    failing = invoke("run", seed_suite, "-e", SEED_ENGINE, "-k", "batched_a")
    assert failing.exit_code == 1
    loose = invoke("run", seed_suite, "-e", SEED_ENGINE, "-k", "batched_a", *override)
    assert loose.exit_code == 0, loose.stdout
    assert re.match(r"1 passed, \d+ deselected in ", summary_line(loose.stdout))


def test_no_diagnose_compares_without_hints():
    args = ("cases/seed.yaml", "-e", SEED_ENGINE)
    code, diagnosed = run_json(*args)
    assert code == 1
    assert diagnosed["cases"][0]["hints"]

    code, bare = run_json(*args, "--no-diagnose")
    assert code == 1
    (case,) = bare["cases"]
    assert case["status"] == "failed"
    assert case["hints"] == []
    assert [item["status"] for item in case["inputs"]] == ["failed"] * 3
    assert all(item["hints"] == [] for item in case["inputs"])


# --- usage errors and invalid case files ---------------------------------------------------


def test_nonexistent_path_is_a_usage_error(tmp_path: Path):
    missing = tmp_path / "nope"
    result = invoke("run", missing)
    assert result.exit_code == 2
    assert result.stderr.startswith("gradcheck: error: ")
    assert str(missing) in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(("limit", "exit_code"), [([], 1), (["0"], 1), (["23"], 0)])
def test_stale_check_limit(limit: list[str], exit_code: int):
    """A never-zeroed engine is caught by asking twice, unless its case (24 input
    elements) is over the limit; 0 asks twice in every case."""
    args = ["--stale-check-limit", *limit] if limit else []
    result = invoke(
        "run",
        ROOT / "tests/corpus/cases/backprop.yaml",
        "-k",
        "chain_sin_times",
        "--engine",
        ROOT / "tests/corpus/closure_bugs.py:StaleGradients",
        *args,
    )
    assert result.exit_code == exit_code, result.stdout
    assert ("stale-gradients" in result.stdout) is (exit_code == 1)


@pytest.mark.parametrize(
    ("engine", "named"),
    [
        ("examples/no_such_engine.py", "no_such_engine.py"),
        ("examples/seed_engine.py:NoSuchClass", "NoSuchClass"),
        ("no_such_package_xyz.engine:Engine", "no_such_package_xyz"),
    ],
)
def test_bad_engine_is_a_usage_error(engine: str, named: str):
    result = invoke("run", "cases/seed.yaml", "--engine", engine)
    assert result.exit_code == 2
    assert result.stderr.startswith("gradcheck: error: ")
    assert named in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [["--format", "xml"], ["--rtol", "-1"], ["--bogus"]])
def test_bad_options_are_usage_errors(args: list[str]):
    result = invoke("run", "cases/seed.yaml", *args)
    assert result.exit_code == 2
    assert result.stderr.strip()


def test_invalid_case_does_not_stop_the_others(mixed: Path):
    code, report = run_json(mixed)
    assert code == 2
    by_name = {case["name"]: case for case in report["cases"]}
    assert by_name["good_one"]["status"] == "passed"
    assert by_name["good_two"]["status"] == "passed"
    bad = by_name["bad_one"]
    assert bad["status"] == "invalid"
    assert bad["file"] == str(mixed) and bad["line"] in BAD_LINES
    assert "inner dimensions" in bad["message"]
    assert report["summary"]["passed"] == 2 and report["summary"]["invalid"] == 1

    rich = invoke("run", mixed)
    assert rich.exit_code == 2
    # The problem goes to stderr, as in `list`; stdout has the report, which counts it.
    assert re.search(
        rf"INVALID +{re.escape(str(mixed))}:({'|'.join(map(str, BAD_LINES))})\b", rich.stderr
    )
    assert "INVALID" not in rich.stdout and "1 invalid, 2 passed" in rich.stdout
    assert rich.stdout.count("PASSED") == 2


def test_unparsable_case_file_is_invalid_with_its_line(tmp_path: Path):
    broken = write(tmp_path / "broken.yaml", "cases: [\n  - name: x\n")
    code, report = run_json(broken)
    assert code == 2
    (case,) = report["cases"]
    assert case["status"] == "invalid"
    assert case["file"] == str(broken) and case["line"] in (1, 2)
    assert "YAML" in case["message"]


def test_max_elements_refuses_large_inputs(tmp_path: Path):
    case = write(
        tmp_path / "big.yaml",
        """
        cases:
          - name: big
            expr: sum(x)
            inputs:
              x: {shape: [4, 4], init: normal}
        """,
    )
    code, report = run_json(case, "--max-elements", "10")
    assert code == 2
    assert report["cases"][0]["status"] == "invalid"
    assert "--max-elements" in report["cases"][0]["message"]
    code, report = run_json(case, "--max-elements", "16")
    assert code == 0


# --- colour -----------------------------------------------------------------------------

COLOUR_SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _colour_params(text: str) -> set[int]:
    """SGR parameters that set a colour (30-49, 90-107); bold/dim/reset are not colour."""
    params = {int(p) for codes in COLOUR_SGR.findall(text) for p in codes.split(";") if p}
    return {p for p in params if 30 <= p <= 49 or 90 <= p <= 107}


@pytest.mark.parametrize(
    "args",
    [
        ["run", "cases/seed.yaml", "-e", SEED_ENGINE],
        ["list", "cases"],
        ["ops"],
        ["faults"],
    ],
)
def test_no_escape_codes_when_not_a_terminal(args: list[str]):
    result = invoke(*args)
    assert not ANSI.search(result.stdout)
    assert not ANSI.search(result.stderr)


def test_no_colour_honours_NO_COLOR_on_a_terminal():
    args = ("run", "cases/seed.yaml", "-e", SEED_ENGINE)
    forced = invoke(*args, env={"FORCE_COLOR": "1"})
    assert _colour_params(forced.stdout)  # the control: a terminal does get colour
    plain = invoke(*args, env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert plain.exit_code == 1
    assert not _colour_params(plain.stdout)


def test_line_numbers_are_printed_verbatim(tmp_path: Path):
    """rich would turn `:100:` into an emoji and drop `[..]` as markup (regression)."""
    case = write(
        tmp_path / "l100.yaml",
        "#\n" * 98
        + textwrap.dedent(
            """\
            cases:
              - name: at_line_100
                expr: matmul(x, y)
                dtype: float32
                inputs:
                  x: [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]
                  y: [[1.0, -1.0], [2.0, 0.5]]
            """
        ),
    )
    listed = invoke("list", case)
    assert f"{case}:100::at_line_100" in listed.stdout
    ran = invoke("run", case, "-e", SEED_ENGINE)
    assert f"{case}:100::at_line_100" in ran.stdout


def test_case_ids_are_never_broken_across_lines(tmp_path: Path):
    """`file:line::name` must survive copy-paste and grep, however long the path (regression)."""
    suite = write(tmp_path / ("deep_" * 24) / "seed_suite.yaml", SEED_SUITE)
    assert len(str(suite)) > 140
    failed, skipped = f"{suite}:2::batched_a", f"{suite}::uses_exp"

    narrow = invoke("run", suite, "-e", SEED_ENGINE, env={"COLUMNS": "60"})
    assert narrow.exit_code == 1
    assert any(failed in line for line in narrow.stdout.splitlines())  # on one line
    assert skipped in narrow.stdout

    report = tmp_path / "report.txt"
    invoke("run", suite, "-e", SEED_ENGINE, "--output", report)
    assert failed in report.read_text() and skipped in report.read_text()

    junit = invoke("run", suite, "-e", SEED_ENGINE, "--format", "junit")
    failure = ET.fromstring(junit.stdout.encode()).find(".//testcase[@name='batched_a']/failure")
    assert failure is not None and failed in (failure.text or "")
