"""The examples of README.md and docs/ are what the code does: the engines and the user op
they show are files the suite runs (examples/tiny_engine.py,
examples/custom_op/smooth_relu_ops.py), and the runs they show are what gradcheck prints
today. Each test reads its example from the section of the page that shows it."""

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from docs_pages import PAGES, ROOT, section
from gradcheck.cli import app


def test_readme_adapter_example_is_the_tested_file():
    shown = section("README.md", "Your own engine in five minutes")
    blocks = re.findall(r"```python\n(import numpy as np\n.*?)```", shown, re.S)
    adapters = [block for block in blocks if "def grad(self, output, wrt, cotangent)" in block]
    assert len(adapters) == 1, "the README lost its adapter example"
    source = (ROOT / "examples" / "tiny_engine.py").read_text()
    body = source.split('"""', 2)[2].lstrip("\n")  # the file less its docstring
    assert adapters[0] == body


def test_user_op_example_is_the_tested_file():
    shown = section("docs/user-ops.md", "User-defined ops")
    source = (ROOT / "examples" / "custom_op" / "smooth_relu_ops.py").read_text()
    body = source.split('"""', 2)[2].lstrip("\n")
    assert f"```python\n{body}```" in shown


def mechanism_rows() -> list[tuple[str, str, str]]:
    """(mechanism, the example's message, the bug class) of each row of the mechanism
    table."""
    table = section("docs/diagnosis.md", "Mechanisms: what is wrong with the rule")
    rows = []
    for line in table.splitlines():
        found = re.match(r"\| `([^`]+)`.*?\| `([^`]+)`.*\(`(\w+_bugs\.py:\w+)`", line)
        if found:
            rows.append(found.groups())
    return rows


def test_diagnosis_shows_an_example_of_each_mechanism_from_a_real_run():
    from corpus import BUGS
    from gradcheck.runner import RunOptions, run
    from test_corpus import bug_case, engine

    rows = mechanism_rows()
    assert len(rows) == 12  # one row per mechanism, the error row last
    shown = {m.split(":")[0] for m, _, _ in rows}
    assert {"ignores-upstream", "not-linear", "identity", "zero", "scaled", "sign-flip",
            "transposed", "shape", "nan-region", "fault", "formula"} <= shown  # fmt: skip
    for mechanism, message, spec in rows:
        bug = next(b for b in BUGS if b.engine.endswith(spec) and b.mechanism)
        [case] = run([bug_case(bug)], engine(bug.engine), RunOptions()).cases
        top = case.hints[0]
        assert top.mechanism.split(":")[0] in mechanism, (spec, top.mechanism)
        parts = [p for p in message.split("…") if p.strip(" ()")]
        assert all(p.strip(" ()") in top.message for p in parts), (spec, top.message)


def test_diagnosis_run_level_summary_is_a_real_run(monkeypatch):
    """The run diagnosis docs/diagnosis.md shows is what `gradcheck run` prints, to the
    summary line."""
    page = section("docs/diagnosis.md", "The run as a whole: root causes and the report card")
    shown = re.search(r"```text\n(run diagnosis:.*?)\n\n\d+ failed", page, re.S)
    assert shown, "docs/diagnosis.md lost its run-level summary"
    monkeypatch.chdir(ROOT)  # the paths in the report read as the page's
    args = ["run", "cases/", "--engine", "tests/planted_engines.py:LeadingOnly", "-q"]
    output = CliRunner().invoke(app, [*args, "--no-cache"], env={"COLUMNS": "88"}).output
    printed = output[output.index("run diagnosis:") :].split("\n\n")[0]
    assert [line.rstrip() for line in printed.splitlines()] == shown.group(1).splitlines()


def shown_lines(text: str) -> list[str]:
    """A run's lines as the docs show them: timings as <t>, no trailing space, no blank
    line, and no TensorFlow start-up, which only a run that waited for its import counts
    apart (not the docs' point)."""
    text = re.sub(r" \(\+\d+\.\d+s TensorFlow start-up\)", "", text)
    timed = (re.sub(r"\d+\.\d+s\b", "<t>", line.rstrip()) for line in text.splitlines())
    return [line for line in timed if line]


def assert_shown_in(shown: str, printed: str) -> None:
    """The lines a page shows (but `...` elisions) are lines of what the command
    printed, in its order; a line ending in ` ...` is shown by its start."""
    lines = iter(shown_lines(printed))
    for line in shown_lines(shown):
        if line.strip() == "...":
            continue
        if line.endswith(" ..."):
            assert any(p.startswith(line[:-4]) for p in lines), line
        else:
            assert line in lines, line


def test_forward_mode_and_second_order_examples_are_real_runs():
    """Each line of the two runs of examples/modes/ that docs/forward-and-second-order.md
    shows (but `...` elisions and timings) is in what the command prints today."""
    import shlex

    page = section("docs/forward-and-second-order.md", "Diagnosis")
    blocks = re.findall(r"```text\n\$ (gradcheck run examples/modes/.*?)\n(.*?)```", page, re.S)
    assert len(blocks) == 2

    for command, shown in blocks:
        out = CliRunner().invoke(app, shlex.split(command)[1:], env={"COLUMNS": "80"})
        assert out.exit_code == 1, out.output
        assert_shown_in(shown, out.stdout)


def test_engines_two_file_engine_is_a_real_run(tmp_path, monkeypatch):
    """docs/engines.md's engine over two files, built as it says: `gradcheck init-engine
    myad/engine.py`, examples/tiny_engine.py's Var and unbroadcast in myad/tape.py, its
    Engine in myad/engine.py under the page's imports, the bug it plants; the run it
    shows is what `gradcheck run` prints."""
    import shlex

    page = section("docs/engines.md", "An engine over two files")
    header = re.search(r"```python\n# myad/engine.py\n(.*?)class Engine:", page, re.S)
    command, shown = re.search(r"```text\n\$ (gradcheck run .*?)\n(.*?)```", page, re.S).groups()
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["init-engine", "myad/engine.py"]).exit_code == 0
    tiny = (ROOT / "examples" / "tiny_engine.py").read_text().split('"""', 2)[2].lstrip("\n")
    engine_at = tiny.index("class Engine")
    Path("myad/tape.py").write_text(tiny[:engine_at])
    right = "grads[id(parent)] = grads.get(id(parent), 0) + share"
    planted = "grads[id(parent)] = share"
    assert right in tiny and f"`{planted}`" in page
    Path("myad/engine.py").write_text(header.group(1) + tiny[engine_at:].replace(right, planted))
    out = runner.invoke(app, [*shlex.split(command)[1:], "--no-cache"], env={"COLUMNS": "80"})
    assert out.exit_code == 1, out.output
    assert_shown_in(shown, out.stdout)


def test_readme_init_engine_run_is_what_it_prints(tmp_path, monkeypatch):
    page = section("README.md", "Start from `gradcheck init-engine`")
    shown = re.search(r"```text\n\$ gradcheck init-engine my_engine.py\n(.*?)```", page, re.S)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, ["init-engine", "my_engine.py"])
    assert out.exit_code == 0
    assert out.output == shown.group(1)
    skipped = CliRunner().invoke(app, ["run", "my_engine_cases.yaml", "--engine", "my_engine.py"])
    assert "nothing was checked" in skipped.stdout and "2 skipped" in skipped.stdout
    assert "(`2\nskipped in ...; nothing was checked`" in page


def test_readme_tiny_engine_sums_over_an_axis_list():
    """The README's complete engine (examples/tiny_engine.py) takes `axis` as it arrives, a
    list for several axes (as `gradcheck fuzz` generates them), with and without keepdims."""
    import gradcheck

    tiny = str(ROOT / "examples" / "tiny_engine.py")
    for expr in ("sum(exp(x) * x, axis=[0, 2])", "sum(x * x, axis=[2, 0], keepdims=True)"):
        result = gradcheck.check(expr, {"x": {"shape": [2, 3, 4]}}, engine=tiny,
                                 cotangent="random", isolate="none")  # fmt: skip
        assert result.passed, str(result)


def test_readme_seed_answer_is_a_real_run(monkeypatch):
    """The README's first block, the seed question's answer, is what `gradcheck run`
    prints today, in its order (the engine in this process: the same report)."""
    import shlex

    readme = (ROOT / "README.md").read_text()
    command, shown = re.search(r"```text\n\$ (gradcheck run cases/seed.yaml .*?)\n(.*?)```",
                               readme, re.S).groups()  # fmt: skip
    assert readme.index(command) < readme.index("## Install")
    monkeypatch.chdir(ROOT)
    args = [*shlex.split(command)[1:], "--isolate", "none", "--no-cache"]
    out = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert out.exit_code == 1, out.output
    assert_shown_in(shown, out.stdout)


def test_the_module_map_names_every_module():
    """docs/architecture.md's module map is how a newcomer finds where a thing lives: each
    module of src/gradcheck is named in the row of its folder (a top-level one in a row's
    first cell), so that a new file cannot be left out of it."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    rows = [
        line.split(" | ", 1) for line in doc.splitlines() if line.startswith("| `src/gradcheck/")
    ]
    package = ROOT / "src" / "gradcheck"
    unnamed = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package)
        if module.name == "__init__.py":
            continue
        if len(module.parts) == 1:
            named = any(
                f"`{module.name}`" in first or f"/{module.name}`" in first for first, _ in rows
            )
        else:
            folder = "/".join(module.parts[:-1]) + "/"
            named = any(
                (f"`{folder}`" in first or f"/{folder}`" in first) and module.name in first + rest
                for first, rest in rows
            )
        if not named:
            unnamed.append(str(module))
    assert not unnamed, f"docs/architecture.md's module map leaves out {unnamed}"


def test_every_gradcheck_import_the_docs_show_imports():
    """A `from gradcheck... import Name` in a page's Python example names what the package
    has today (a module moved in a refactor once left one pointing at nothing)."""
    import importlib

    shown = set()
    for page in PAGES:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
            shown |= set(re.findall(r"^from (gradcheck[\w.]*) import (\w+)", block, re.M))
    assert ("gradcheck.engines.stock.torch", "TorchEngine") in shown
    for module, name in sorted(shown):
        assert hasattr(importlib.import_module(module), name), f"from {module} import {name}"


def test_readme_ci_screen_is_a_working_setup(tmp_path, monkeypatch):
    """The README's CI in one screen, as a project would have it: its `[tool.gradcheck]`
    naming the module engine mypkg.autodiff (the tiny engine) and cases/, then its
    `gradcheck run` lines, which write the reports they say."""
    page = section("README.md", "In CI, in one screen")
    config = re.search(r"```toml\n(.*?)```", page, re.S).group(1)
    commands = re.findall(r"^(gradcheck run [^#\n]*?) *(?:#|$)", page, re.M)
    assert len(commands) == 2
    monkeypatch.chdir(tmp_path)
    Path("pyproject.toml").write_text(config)
    Path("mypkg").mkdir()
    Path("mypkg/__init__.py").write_text("")
    Path("mypkg/autodiff.py").write_text((ROOT / "examples" / "tiny_engine.py").read_text())
    runner = CliRunner()
    assert runner.invoke(app, ["init-engine", "first.py"]).exit_code == 0
    Path("cases").mkdir()
    Path("first_cases.yaml").rename("cases/first.yaml")
    for command in commands:
        out = runner.invoke(app, command.split()[1:], env={"COLUMNS": "80"})
        assert out.exit_code == 0, out.output
        assert "2 passed" in out.output
        assert ("engine tiny (from pyproject.toml)" in out.output) == (" -q" not in command)
    assert Path("report.html").read_text().startswith("<!DOCTYPE html>")
    assert "<testsuite" in Path("report.xml").read_text()


def test_readme_lists_every_op_in_its_family():
    """README's table of ops by family: each row's ops are those declared in that
    family's module (src/gradcheck/ops/<family>.py), every op in one row."""
    from gradcheck.ops import all_ops

    table = section("README.md", "The ops, by family")
    rows = dict(re.findall(r"^\| (\w+) \| `([^`]+)`", table, re.M))
    declared: dict[str, list[str]] = {}
    for op in all_ops():
        if not op.origin:  # the registry's own, not a user op a test registered
            declared.setdefault(op.tf.__module__.rsplit(".", 1)[-1], []).append(op.name)
    assert {family: ops.split() for family, ops in rows.items()} == declared


@pytest.mark.parametrize(("example", "flag", "raised"), [
    ("torch_model.py", "--torch", "GradcheckError"),
    ("jax_model.py", "--jax", "AssertionError"),
])  # fmt: skip
def test_the_side_by_side_is_what_each_checker_prints(example, flag, raised):
    """docs/pytorch-and-jax.md shows what torch.autograd.gradcheck (check_grads) and
    gradcheck.torch.check (gradcheck.jax.check) print for the bug of each example of
    examples/frameworks/: both are real runs of it today."""
    import subprocess
    import sys

    page = section("docs/pytorch-and-jax.md", "The same bug, side by side")
    blocks = re.findall(r"```text\n(.*?)```", page, re.S)
    theirs_shown, ours_shown = blocks[:2] if example.startswith("torch") else blocks[2:]
    path = ["examples/frameworks/" + example]
    run = lambda *flags: subprocess.run(
        [sys.executable, *path, *flags], capture_output=True, text=True, cwd=ROOT, check=False
    )
    theirs, ours = run(flag), run()
    assert theirs.returncode == 1 and raised in theirs.stderr
    assert_shown_in(theirs_shown, theirs.stderr)
    assert ours.returncode == 0, ours.stderr
    assert_shown_in(ours_shown, ours.stdout)
