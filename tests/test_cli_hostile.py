"""Hostile command-line values (issue 22): `-k` nested deep, `check -i` literals with
YAML aliases or deep nesting, `fuzz --out` that cannot take a case file, `--output` a
FIFO nobody reads. Each a clear message and exit 2 (or, for a finding the disk cannot
take, the finding printed instead), never a traceback, a RecursionError or a hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcheck.cli import app

ROOT = Path(__file__).resolve().parents[1]
SEED_ENGINE = str(ROOT / "examples" / "seed_engine.py")
MUL_SELF = f"{ROOT / 'tests' / 'corpus' / 'tape_bugs.py'}:MulSelf"  # one bug: x * x
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
CASES = """\
cases:
  - name: product
    expr: sum(x * y)
    inputs: {x: [1.0, 2.0], y: [3.0, 4.0]}
"""


@pytest.fixture(autouse=True)
def _in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.yaml").write_text(CASES)


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


NUMERIC = ("--reference", "numeric", "--no-cache")


@pytest.mark.parametrize(
    "keyword",
    ["(" * 5000 + "product" + ")" * 5000, "not " * 5000 + "product", "(not " * 3000 + "x"],
    ids=["parentheses", "nots", "both"],
)
def test_a_deeply_nested_k_is_a_usage_error(keyword: str) -> None:
    result = invoke("run", "cases.yaml", "-k", keyword, *NUMERIC)
    assert result.exit_code == 2, result.output
    assert "is not a selection expression: it nests parentheses or `not` over 100 deep" in (
        " ".join(result.stderr.split())
    )
    assert len(result.stderr) < 2000  # the expression is shown cut short


def test_a_k_nested_within_the_bound_still_selects() -> None:
    result = invoke("run", "cases.yaml", "-k", "(" * 50 + "not not product" + ")" * 50, *NUMERIC)
    assert result.exit_code == 0, result.output
    assert "1 passed" in result.stdout


LOL = ", ".join(["1.0"] * 9)
BOMB = (
    "[&a0 ["
    + LOL
    + "]"
    + "".join(f", &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9))
    + "]"
)


@pytest.mark.parametrize(
    ("literal", "words"),
    [
        (BOMB, "expands to more than"),  # 9**9 elements once expanded
        ("&a [1.0, *a]", "contains an alias of itself"),
        ("[" * 5000 + "]" * 5000, "maximum nesting depth"),
        ("!!python/object/apply:os.system ['touch MARKER']", "not a literal"),
    ],
    ids=["alias-bomb", "self-alias", "deep", "python-tag"],
)
def test_check_i_reads_literals_as_case_files_are_read(
    tmp_path: Path, literal: str, words: str
) -> None:
    result = invoke("check", "sum(x)", "-i", f"x={literal}", *NUMERIC)
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.stderr.split())
    assert "RecursionError" not in result.output and len(result.stderr) < 3000
    assert not (tmp_path / "MARKER").exists()


def test_check_i_still_takes_a_plain_literal() -> None:
    result = invoke("check", "sum(x * x)", "-i", "x=[1.0, 2.0]", *NUMERIC)
    assert result.exit_code == 0, result.output
    assert "1 passed" in result.stdout


@pytest.mark.parametrize("kind", ["file", "device"])
def test_fuzz_out_that_is_no_folder_is_refused_before_the_search(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "taken"
    if kind == "file":
        out.write_text("mine")
    else:
        out = Path("/dev/full")
    result = invoke("fuzz", "--engine", SEED_ENGINE, "--seed", "2", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert f"--out {out}: {out} is not a folder" in " ".join(result.stderr.split())
    assert "examples" not in result.stdout  # no search was run to be lost
    if kind == "file":
        assert out.read_text() == "mine"


def test_a_finding_the_out_folder_cannot_take_is_printed_instead(tmp_path: Path) -> None:
    found = tmp_path / "found"
    (found / "fault-mul.self.yaml").mkdir(parents=True)  # its place is taken
    result = invoke(
        "fuzz", "--engine", MUL_SELF, "--ops", "mul,add", "--seed", "3", "--max-examples", "80",
        "--out", "found",
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # the bug, still found and reported
    text = " ".join(result.stdout.split())
    assert "case file (not written: --out found:" in text
    assert "fault:mul.self" in text and "- name: fault-mul.self" in result.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_output_to_a_fifo_nobody_reads_is_refused_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    done = subprocess.run(
        [sys.executable, "-m", "gradcheck", "run", "cases.yaml", *NUMERIC, "-o", "pipe"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,  # a blocking open would wait here forever
    )
    assert done.returncode == 2, done.stderr
    assert "a FIFO that no process is reading" in done.stderr
    assert "Traceback" not in done.stderr
    assert "1 passed" in done.stdout  # the run itself happened, and said so


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_output_to_a_fifo_with_a_reader_is_written(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    reader = subprocess.Popen(["cat", str(tmp_path / "pipe")], stdout=subprocess.PIPE, text=True)
    try:
        result = invoke("run", "cases.yaml", *NUMERIC, "-f", "json", "-o", "pipe")
        assert result.exit_code == 0, result.output
        read, _ = reader.communicate(timeout=60)
    finally:
        reader.kill()
    assert '"status": "passed"' in read


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_a_signal_stops_writing_to_a_fifo_whose_reader_never_reads(tmp_path: Path) -> None:
    """The report is bigger than a pipe holds, and its reader never reads: SIGTERM must
    still end the run (it waited until the reader left, whatever signals came)."""
    many = "".join(
        f"  - name: c{i}\n    expr: sum(x * x)\n    inputs: {{x: [1.0, 2.0]}}\n" for i in range(600)
    )
    (tmp_path / "many.yaml").write_text("cases:\n" + many)
    os.mkfifo(tmp_path / "pipe.json")
    reader = os.open(tmp_path / "pipe.json", os.O_RDONLY | os.O_NONBLOCK)  # never read
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "gradcheck", "run", "many.yaml", *NUMERIC, "-o", "pipe.json"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        for line in process.stdout:  # the terminal report is printed before the file's
            if "600 passed in" in line:
                break
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        os.close(reader)
    assert process.returncode == 143, err
    assert "pipe.json: stopped by SIGTERM, not all written" in err
