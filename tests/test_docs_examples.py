"""The README's examples are files the suite runs: examples/tiny_engine.py, and the user-op
declaration examples/custom_op/softplus_ops.py."""

import re
from pathlib import Path

from typer.testing import CliRunner

from gradcheck.cli import app

ROOT = Path(__file__).resolve().parents[1]


def test_readme_adapter_example_is_the_tested_file():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(import numpy as np\n.*?)```", readme, re.S)
    adapters = [block for block in blocks if "def grad(self, output, wrt, cotangent)" in block]
    assert len(adapters) == 1, "the README lost its adapter example"
    source = (ROOT / "examples" / "tiny_engine.py").read_text()
    body = source.split('"""', 2)[2].lstrip("\n")  # the file less its docstring
    assert adapters[0] == body


def test_readme_user_op_example_is_the_tested_file():
    readme = (ROOT / "README.md").read_text()
    source = (ROOT / "examples" / "custom_op" / "softplus_ops.py").read_text()
    body = source.split('"""', 2)[2].lstrip("\n")
    assert f"```python\n{body}```" in readme


def mechanism_rows() -> list[tuple[str, str, str]]:
    """(mechanism, the example's message, the bug class) of each row of the README's
    mechanism table."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Mechanisms: what is wrong with the rule", 1)[1].split("###", 1)[0]
    rows = []
    for line in table.splitlines():
        found = re.match(r"\| `([^`]+)`.*?\| `([^`]+)`.*\(`(\w+_bugs\.py:\w+)`", line)
        if found:
            rows.append(found.groups())
    return rows


def test_readme_shows_an_example_of_each_mechanism_from_a_real_run():
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


def test_readme_run_level_summary_is_a_real_run(monkeypatch):
    """The README's run diagnosis is what `gradcheck run` prints, to the summary line."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The run as a whole", 1)[1]
    shown = re.search(r"```text\n(run diagnosis:.*?)\n\n\d+ failed", section, re.S)
    assert shown, "the README lost its run-level summary"
    monkeypatch.chdir(ROOT)  # the paths in the report read as the README's
    args = ["run", "cases/", "--engine", "tests/planted_engines.py:LeadingOnly", "-q"]
    output = CliRunner().invoke(app, [*args, "--no-cache"], env={"COLUMNS": "88"}).output
    printed = output[output.index("run diagnosis:") :].split("\n\n")[0]
    assert [line.rstrip() for line in printed.splitlines()] == shown.group(1).splitlines()


def shown_lines(text: str) -> list[str]:
    """A run's lines as the README shows them: timings as <t>, no trailing space, no blank
    line, and no TensorFlow start-up, which only a run that waited for its import counts
    apart (not the README's point)."""
    text = re.sub(r" \(\+\d+\.\d+s TensorFlow start-up\)", "", text)
    timed = (re.sub(r"\d+\.\d+s\b", "<t>", line.rstrip()) for line in text.splitlines())
    return [line for line in timed if line]


def assert_shown_in(shown: str, printed: str) -> None:
    """The lines the README shows (but `...` elisions) are lines of what the command
    printed, in its order; a line ending in ` ...` is shown by its start."""
    lines = iter(shown_lines(printed))
    for line in shown_lines(shown):
        if line.strip() == "...":
            continue
        if line.endswith(" ..."):
            assert any(p.startswith(line[:-4]) for p in lines), line
        else:
            assert line in lines, line


def test_readme_forward_mode_and_second_order_examples_are_real_runs():
    """Each line of the README's two runs of examples/modes/ (but `...` elisions and
    timings) is in what the command prints today."""
    import shlex

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Forward mode and second order", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```text\n\$ (gradcheck run examples/modes/.*?)\n(.*?)```", section, re.S)
    assert len(blocks) == 2

    for command, shown in blocks:
        out = CliRunner().invoke(app, shlex.split(command)[1:], env={"COLUMNS": "80"})
        assert out.exit_code == 1, out.output
        assert_shown_in(shown, out.stdout)


def test_readme_two_file_engine_is_a_real_run(tmp_path, monkeypatch):
    """The README's engine over two files, built as it says: `gradcheck init-engine
    myad/engine.py`, examples/tiny_engine.py's Var and unbroadcast in myad/tape.py, its
    Engine in myad/engine.py under the README's imports, the bug it plants; the run it
    shows is what `gradcheck run` prints."""
    import shlex

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### An engine over two files", 1)[1].split("\n### ", 1)[0]
    header = re.search(r"```python\n# myad/engine.py\n(.*?)class Engine:", section, re.S)
    command, shown = re.search(r"```text\n\$ (gradcheck run .*?)\n(.*?)```", section, re.S).groups()
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["init-engine", "myad/engine.py"]).exit_code == 0
    tiny = (ROOT / "examples" / "tiny_engine.py").read_text().split('"""', 2)[2].lstrip("\n")
    engine_at = tiny.index("class Engine")
    Path("myad/tape.py").write_text(tiny[:engine_at])
    right = "grads[id(parent)] = grads.get(id(parent), 0) + share"
    planted = "grads[id(parent)] = share"
    assert right in tiny and f"`{planted}`" in section
    Path("myad/engine.py").write_text(header.group(1) + tiny[engine_at:].replace(right, planted))
    out = runner.invoke(app, [*shlex.split(command)[1:], "--no-cache"], env={"COLUMNS": "80"})
    assert out.exit_code == 1, out.output
    assert_shown_in(shown, out.stdout)


def test_readme_init_engine_run_is_what_it_prints(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Start from `gradcheck init-engine`", 1)[1]
    shown = re.search(r"```text\n\$ gradcheck init-engine my_engine.py\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, ["init-engine", "my_engine.py"])
    assert out.exit_code == 0
    assert out.output == shown.group(1)
    skipped = CliRunner().invoke(app, ["run", "my_engine_cases.yaml", "--engine", "my_engine.py"])
    assert "nothing was checked" in skipped.stdout and "2 skipped" in skipped.stdout
    assert "(`2\nskipped in ...; nothing was checked`" in section


def test_readme_tiny_engine_sums_over_an_axis_list():
    """The README's complete engine takes `axis` as it arrives, a list for several axes
    (as `gradcheck fuzz` generates them), with and without keepdims."""
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
