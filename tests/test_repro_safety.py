"""`--repro DIR` with hostile case files (issue 22, item 1): a case file is untrusted data
and a repro script is meant to be run, so no text of the case may become the script's
code, and writing the scripts never follows a planted link or replaces a file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcheck.cli import app

ROOT = Path(__file__).resolve().parents[1]
PLANTED = f"{ROOT}/tests/planted_engines.py:TanhFromInput"
ENV = {"COLUMNS": "200", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
# Python that creates the file MARKER in the folder it runs in, if it ever runs.
TOUCH = '__import__("pathlib").Path("MARKER").touch()'


@pytest.fixture(autouse=True)
def _in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def repro(*args: str):
    result = CliRunner().invoke(app, ["run", *args, "-e", PLANTED, "--repro", "out"], env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def run_script(script: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=script.parent
    )


HOSTILE_CASES = [  # (the case file's name, the case's name, its expression)
    # A comment inside a multi-line call is part of the node's text: it once closed the
    # script's docstring and ran.
    ("comment.yaml", "comment", f'tanh(x  # """ + {TOUCH} + """\n)'),
    (f'we""" + {TOUCH} + """ird.yaml', "quoted_file", "tanh(x)"),  # the file's name, alike
    # Backslashes (in the file's name, in a comment) were escapes there: a SyntaxError.
    ("back\\N.yaml", "backslash", "tanh(x  # \\N{oops} \\x \\\n)"),
]


def test_case_text_never_becomes_code_in_a_repro_script(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    for file, name, expr in HOSTILE_CASES:
        (tmp_path / "cases" / file).write_text(  # JSON's strings are YAML's double-quoted ones
            f"cases:\n  - name: {name}\n    expr: {json.dumps(expr)}\n"
            "    inputs: {x: [0.5, -0.25]}\n"
            "  - name: neighbour\n    expr: x * 2.0\n    inputs: {x: [1.0]}\n"
        )
    result = repro("cases")
    assert result.exit_code == 1, result.output
    assert "3 failed, 3 passed" in result.stdout  # the neighbours ran, and passed
    scripts = sorted((tmp_path / "out").glob("*.py"))
    assert [p.name for p in scripts] == [
        f"{n}.tanh.py" for n in ("backslash", "comment", "quoted_file")
    ]
    for script in scripts:
        done = run_script(script)
        assert not (script.parent / "MARKER").exists(), script.read_text()
        assert done.returncode == 1, done.stderr  # it still reproduces the fault
        assert "gradient of a0: MISMATCH" in done.stdout, done.stdout
        text = script.read_text()
        assert text.split('"""')[2].lstrip().startswith("import"), "the docstring is fixed"
    first = (tmp_path / "out" / "comment.tanh.py").read_text()
    assert 'NODE = \'tanh(x # """ + __import__' in first  # there, as a string


def test_repro_neither_follows_a_planted_link_nor_replaces_a_file(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(
        "cases:\n"
        + "".join(f"  - name: {n}\n    expr: tanh(x)\n    inputs: {{x: [0.5]}}\n" for n in "abcd")
    )
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / "a.tanh.py").symlink_to(victim)  # planted where a script goes
    (out / "b.tanh.npz").symlink_to(tmp_path / "nowhere.npz")  # a dangling one
    (out / "c.tanh.py").write_text("# mine\n")  # a script of an earlier run, say
    result = repro("cases.yaml")
    assert result.exit_code == 1
    assert victim.read_text() == "precious" and not (tmp_path / "nowhere.npz").exists()
    assert (out / "c.tanh.py").read_text() == "# mine\n"
    for case in "abc":
        assert f"cases.yaml::{case}: out/{case}.tanh.py or .npz already exists" in result.stderr
    # Nothing half-written is left beside what was refused.
    assert not (out / "a.tanh.npz").exists() and not (out / "c.tanh.npz").exists()
    assert not (out / "b.tanh.py").exists()
    assert "--repro: 1 script(s) in out: out/d.tanh.py" in result.stderr  # d's place was free
    assert run_script(out / "d.tanh.py").returncode == 1
