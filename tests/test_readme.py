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


def test_readme_forward_mode_and_second_order_examples_are_real_runs():
    """Each line of the README's two runs of examples/modes/ (but `...` elisions and
    timings) is in what the command prints today."""
    import shlex

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Forward mode and second order", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```text\n\$ (gradcheck run examples/modes/.*?)\n(.*?)```", section, re.S)
    assert len(blocks) == 2

    def lines(text: str) -> list[str]:
        # A run that waited for TensorFlow's import counts it apart: not the README's point.
        text = re.sub(r" \(\+\d+\.\d+s TensorFlow start-up\)", "", text)
        timed = (re.sub(r"\d+\.\d+s\b", "<t>", line.rstrip()) for line in text.splitlines())
        return [line for line in timed if line]

    for command, shown in blocks:
        out = CliRunner().invoke(app, shlex.split(command)[1:], env={"COLUMNS": "80"})
        assert out.exit_code == 1, out.output
        printed = lines(out.stdout)
        for line in lines(shown):
            if line.strip() == "...":
                continue
            if line.endswith(" ..."):  # a hint shown by its start
                assert any(p.startswith(line[:-4]) for p in printed), line
            else:
                assert line in printed, line
