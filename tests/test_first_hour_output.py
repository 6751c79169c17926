"""The first hour of a new user (issue 9): output that puts the answer first and fits 80
columns, every problem of a case file reported on stderr, engine output captured.

The 80-column checks run every shipped case (cases/) with the seed engine (which fails,
errs and lacks ops: every kind of case line) and the builtin engine, and render the
same results twice: at 80 columns, and at a width nothing wraps at, whose words are
what the 80-column lines may break between.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gradcheck.cases import load_paths
from gradcheck.cli import app
from gradcheck.engines.loading import load_engine
from gradcheck.report import render
from gradcheck.runner import RunOptions, run

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "cases"
SEED_ENGINE = ROOT / "examples" / "seed_engine.py"
WIDTH = 80
NUMBERS = re.compile(r"[\s\[\]\d.,eE+\-naif]*")


def rendered(result, width: int, verbose: bool = False) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True, highlight=False, emoji=False)
    render(result, console, verbose=verbose)
    return buffer.getvalue()


@pytest.fixture(scope="module", params=["seed", "builtin"])
def shipped_run(request):
    engine = load_engine(str(SEED_ENGINE)) if request.param == "seed" else "builtin"
    # As a user runs it, from the project: `gradcheck run cases/` (ids relative to there;
    # an id is never broken, so an absolute path deep enough could not fit any width).
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        return run(load_paths(["cases"]), engine, RunOptions())
    finally:
        os.chdir(here)


def fitting_problems(narrow: str, wide: str) -> list[str]:
    """Every line longer than WIDTH, ending in a blank, or breaking a word: a word of the
    narrow report that is no word of the wide one (a word longer than a line excepted)."""
    words = set(wide.split())
    problems = []
    for line in narrow.splitlines():
        if len(line) > WIDTH:
            problems.append(f"longer than {WIDTH}: {line!r}")
        if line != line.rstrip():
            problems.append(f"trailing blank: {line!r}")
        if NUMBERS.fullmatch(line):
            continue  # rows of arrays, never wrapped; summarised (`...`) when too wide
        for word in line.split():
            if word not in words and not any(len(w) > WIDTH - 10 and word in w for w in words):
                problems.append(f"broken word {word!r} in {line!r}")
    return problems


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_every_shipped_case_fits_80_columns_at_words(shipped_run, verbose: bool):
    narrow = rendered(shipped_run, WIDTH, verbose)
    wide = rendered(shipped_run, 10_000, verbose)
    assert narrow.count("\n") > len(shipped_run.cases)  # the report is there
    assert fitting_problems(narrow, wide) == []


def test_the_check_itself_finds_a_broken_word_and_a_long_line():
    wide = "SKIPPED cases/x.yaml::a  unsupported: engine has no method for add\n"
    broken = "SKIPPED cases/x.yaml::a  unsupported: engine has no met\nhod for add\n"
    assert any("broken word 'met'" in p for p in fitting_problems(broken, wide))
    assert any("longer than" in p for p in fitting_problems("x" * 81, "x" * 81))
    assert any("trailing" in p for p in fitting_problems("a \n", "a"))


def test_the_top_hint_is_the_first_thing_under_a_failing_case(shipped_run):
    lines = rendered(shipped_run, WIDTH).splitlines()
    failing = [c for c in shipped_run.cases if c.status in ("failed", "error") and c.hints]
    if shipped_run.engine == "builtin":
        assert failing == []  # the builtin engine passes every shipped case
        return
    assert failing
    for case in failing:
        at = next(i for i, line in enumerate(lines) if f"::{case.name}" in line)
        top = case.hints[0]
        assert lines[at + 1].split() == ["hint", top.code, top.confidence], lines[at : at + 3]
        block = " ".join(" ".join(lines[at + 1 : at + 40]).split())
        # its node and message, then its fix, all before the table and the expression
        assert top.fix.split()[0] in block
        fix_at = block.index("fix " + top.fix.split()[0])
        for later in ("expr ", "input ref shape"):
            if later in block:
                assert block.index(later) > fix_at


def test_the_seed_report_folds_consequences_of_the_top_hint():
    seed = run(load_paths([CASES / "seed.yaml"]), load_engine(str(SEED_ENGINE)), RunOptions())
    text = rendered(seed, WIDTH)
    case = text[text.index("::seed_batched_matmul_chain") :].split("\n\n")[0]
    flat = " ".join(case.split())
    assert flat.count("hint fault:matmul.full-transpose") == 1
    assert "other explanations" not in case
    # the op-vjp hints it explains, folded into one line that does not repeat the code
    also = flat[flat.index("also seen as") :].split(" expr ")[0]
    assert also.startswith("also seen as op-vjp at matmul(x, y) arg 1")
    assert "fault:matmul.full-transpose" not in also


def test_arrays_rows_are_never_wrapped():
    # 3x3x3 arrays side by side are wider than 80 columns: the blocks go one under another.
    from gradcheck.api import check
    from gradcheck.engines.builtin.engine import BuiltinEngine

    class Doubled(BuiltinEngine):
        name = "doubled"

        def grad(self, output, wrt, cotangent):
            return [2 * g for g in super().grad(output, wrt, cotangent)]

    found = check(
        "tanh(x) * 3.25",
        {"x": {"shape": [3, 3, 3]}},
        engine=Doubled,
        cotangent="random",
        reference="numeric",
    )
    assert found.status == "failed"
    text = str(found)  # the rich report of the case, at 80 columns
    for line in text.splitlines():
        assert len(line) <= WIDTH, line
    # Side by side the three blocks would need 90 columns: the difference goes below,
    # and each of its 9 rows of 3 numbers is whole on its line.
    difference = text[text.index("engine - reference") :].split("other explanations")[0]
    rows = [line for line in difference.splitlines()[1:] if line.strip()]
    assert len(rows) == 9
    assert all(len(re.findall(r"-?\d+\.\d*", row)) == 3 for row in rows), rows


# --- case-file problems ------------------------------------------------------------------


MANY_PROBLEMS = """\
cases:
  - name: many
    expr: x * y
    inputs:
      x: [1.0, 2.0]
      y: {shape: [2], init: gaussian}
    dtype: float8
    tolerence: {rtol: 1}
  - name: typo
    expr: tahn(x)
    inputs: {x: [1.0, 2.0]}
  - name: shapes
    expr: x @ w
    inputs: {x: [[1.0, 2.0, 3.0]], w: [[1.0, 2.0]]}
"""


def invoke(*args: str):
    return CliRunner().invoke(app, [*map(str, args)], env={"COLUMNS": "80"})


@pytest.fixture
def many(tmp_path: Path) -> Path:
    path = tmp_path / "many.yaml"
    path.write_text(MANY_PROBLEMS)
    return path


def test_every_problem_of_a_case_is_reported_at_its_line(many: Path):
    from gradcheck.cases import load_file

    by_name = {item.name: item for item in load_file(many)}
    lines = [line for line, _ in by_name["many"].problems]
    assert lines == [6, 7, 8]  # the init, the dtype, the key: all three, in file order
    messages = " | ".join(message for _, message in by_name["many"].problems)
    assert "unknown init 'gaussian'" in messages
    assert "dtype 'float8'" in messages
    assert "did you mean 'tolerance'?" in messages
    assert by_name["many"].line == 6
    assert f"{many}:7: dtype" in by_name["many"].message


def test_an_unknown_op_gets_a_did_you_mean(many: Path):
    from gradcheck.cases import load_file

    typo = {item.name: item for item in load_file(many)}["typo"]
    assert "unknown op 'tahn' (did you mean 'tanh'?" in typo.message


def test_a_shape_error_names_both_shapes(many: Path):
    from gradcheck.cases import load_file

    shapes = {item.name: item for item in load_file(many)}["shapes"]
    assert "x @ w: inner dimensions 3 and 1 differ (shapes (1, 3) and (1, 2))" in shapes.message


@pytest.mark.parametrize("command", ["list", "run"])
def test_problems_go_to_stderr_and_the_report_to_stdout(many: Path, command: str):
    result = invoke(command, many, *(["--reference", "numeric"] if command == "run" else []))
    assert result.exit_code == 2
    stderr = result.stderr
    assert [line.split(":")[0] for line in stderr.splitlines() if line.startswith("INVALID")] == [
        f"INVALID {many}"
    ] * 3
    flat = " ".join(stderr.split())
    for said in ("dtype 'float8'", "did you mean 'tanh'?", "(shapes (1, 3) and (1, 2))"):
        assert said in flat
    assert "INVALID" not in result.stdout
    assert "3 invalid" in result.stdout
    for line in stderr.splitlines():
        # a location longer than a line (pytest's tmp path) stands alone, unbroken
        assert len(line) <= WIDTH or line.split()[1:] == [f"{many}:{line.split(':')[-2]}:"]
        assert line == line.rstrip(), line


def test_json_keeps_the_problems_and_stdout_stays_json(many: Path):
    result = invoke("run", many, "--format", "json", "--reference", "numeric")
    report = json.loads(result.stdout)
    many_case = next(c for c in report["cases"] if c["name"] == "many")
    assert many_case["status"] == "invalid"
    assert "did you mean 'tolerance'?" in many_case["message"]
    assert "INVALID" in result.stderr


def test_no_user_facing_message_cites_the_spec():
    # Users have the README, not the SPEC: no string in src/ but a docstring sends them there.
    import ast

    cited = []
    for path in (ROOT / "src" / "gradcheck").rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and re.search(r"SPEC [§,]|§", node.value)
            ):
                cited.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert cited == []


def test_list_indents_a_multi_line_expression_as_a_block():
    result = invoke("list", CASES / "composite.yaml")
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "::diamond_double_use" in line)
    assert lines[at + 1 : at + 3] == ["    h = x * y", "    h + h"]
    assert re.fullmatch(r"\d+ cases", lines[-1])
    single = invoke("list", CASES / "seed.yaml")
    assert single.stdout.splitlines()[-1] == "1 case"


# --- engine output -----------------------------------------------------------------------


NOISY = """\
import sys
print("the engine's module is imported")
from gradcheck.engines.builtin import BuiltinEngine


class Engine(BuiltinEngine):
    name = "noisy"

    def grad(self, output, wrt, cotangent):
        print("grad was called")
        print("a warning on stderr", file=sys.stderr)
        return super().grad(output, wrt, cotangent)
"""
ONE_CASE = "cases:\n  - name: a\n    expr: x * y\n    inputs: {x: [1.0, 2.0], y: [3.0, 4.0]}\n"


@pytest.mark.parametrize("isolate", ["none", "process"])
@pytest.mark.parametrize("format", ["json", "junit"])
def test_what_an_engine_prints_never_reaches_a_machine_readable_stdout(
    tmp_path: Path, isolate: str, format: str
):
    (tmp_path / "noisy.py").write_text(NOISY)
    (tmp_path / "one.yaml").write_text(ONE_CASE)
    done = subprocess.run(
        [
            *(str(Path(sys.executable).parent / "gradcheck"), "run", "one.yaml"),
            *("--engine", "noisy.py", "--isolate", isolate, "--format", format),
            *("--reference", "numeric"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    if format == "json":
        case = json.loads(done.stdout)["cases"][0]  # stdout parses as JSON
        assert "grad was called" in case["captured"]
        assert "a warning on stderr" in case["captured"]
    else:
        import xml.dom.minidom

        xml.dom.minidom.parseString(done.stdout)  # the whole of stdout is the XML
        assert done.stdout.lstrip().startswith("<?xml")


def test_the_rich_report_shows_an_engines_output_with_its_case(tmp_path: Path):
    (tmp_path / "noisy.py").write_text(NOISY)
    (tmp_path / "one.yaml").write_text(ONE_CASE)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = invoke("run", "one.yaml", "--engine", "noisy.py", "-v", "--reference", "numeric")
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    after = result.stdout[result.stdout.index("PASSED  one.yaml::a") :]
    assert "captured output:" in after
    assert after.index("grad was called") < after.index("1 passed")


def test_every_problem_of_defaults_is_reported(tmp_path: Path):
    from gradcheck.cases import load_file

    path = tmp_path / "defaults.yaml"
    path.write_text("defaults:\n  dtype: f8\n  tolerence: 1\ncases: []\n")
    (item,) = load_file(path)
    assert [line for line, _ in item.problems] == [2, 3]
    assert "dtype 'f8'" in item.message and "did you mean 'tolerance'?" in item.message
