"""The question gradcheck grew from, end to end (/work/shared/seed, SPEC intro).

A learner's reverse-mode autodiff (examples/seed_engine.py) gets all three gradients
of matmul(matmul(x, y), z) wrong on batched inputs, because its matmul VJP uses
`tf.transpose` without `perm`. One command must say so: the run fails, shows the
question's wrong numbers next to TensorFlow's, and its best hint names the fault.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gradcheck.cli import app

ROOT = Path(__file__).resolve().parents[1]
SEED_CASES = "cases/seed.yaml"
BUGGY = "examples/seed_engine.py"
FIXED = "examples/seed_engine_fixed.py"
ENV = {"COLUMNS": "120", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}

# What the question's engine printed (the product's acceptance fixture, from the seed).
QUESTION_ENGINE = {
    "x": [[[-5.0, 7.0], [-5.0, 7.0]], [[-5.0, 7.0], [-5.0, 7.0]]],
    "y": [[33.0, 22.0], [54.0, 36.0]],
    "z": [[[9.0, 9.0], [14.0, 14.0]], [[-5.0, -5.0], [-6.0, -6.0]]],
}
# What TensorFlow printed in the question.
QUESTION_TENSORFLOW = {
    "x": [[[-22.0, 18.0], [-22.0, 18.0]], [[32.0, -16.0], [32.0, -16.0]]],
    "y": [[66.0, -8.0], [80.0, -8.0]],
    "z": [[[5.0, 5.0], [-1.0, -1.0]], [[18.0, 18.0], [-10.0, -10.0]]],
}


def sandbox(directory: Path) -> Path:
    """A cwd like the repository's (cases/, examples/) where a run's files stay out of it."""
    for name in ("cases", "examples"):
        (directory / name).symlink_to(ROOT / name, target_is_directory=True)
    return directory


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sandbox(tmp_path_factory.mktemp("seed"))


@pytest.fixture(autouse=True)
def _in_workdir(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args), env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.fixture(scope="module")
def seed_case() -> dict:
    """The question's case as written in cases/seed.yaml."""
    (case,) = yaml.safe_load((ROOT / SEED_CASES).read_text())["cases"]
    return case


@pytest.fixture(scope="module")
def report(workdir: Path) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workdir)
        result = invoke("run", SEED_CASES, "--engine", BUGGY, "--format", "json", "-v")
    assert result.exit_code == 1, result.stdout
    return json.loads(result.stdout)


def test_the_pinned_expectation_is_what_tensorflow_printed_in_the_question(seed_case: dict):
    assert seed_case["expect"] == QUESTION_TENSORFLOW
    assert seed_case["expr"].replace(" ", "") == "matmul(matmul(x,y),z)"


def test_the_buggy_engine_fails_with_the_questions_numbers(report: dict, seed_case: dict):
    (case,) = report["cases"]
    assert case["name"] == seed_case["name"]
    assert case["status"] == "failed"
    assert report["summary"]["failed"] == 1
    assert report["engine"] == "seed-engine"
    assert case["forward"]["status"] == "passed"
    inputs = {item["name"]: item for item in case["inputs"]}
    assert sorted(inputs) == ["x", "y", "z"]
    for name, item in inputs.items():
        assert item["status"] == "failed", name
        assert item["mismatched"] == item["size"], name
        # The engine's numbers, exactly as the question printed them...
        assert item["engine"] == QUESTION_ENGINE[name], name
        # ...and TensorFlow's, which still match the case's pinned `expect`.
        assert item["reference"] == seed_case["expect"][name], name


def test_the_best_hint_is_the_full_transpose_fault(report: dict):
    (case,) = report["cases"]
    top = case["hints"][0]
    assert top["code"] == "fault:matmul.full-transpose"
    assert top["confidence"] == "exact"
    fix = top["fix"].lower()
    assert "last two" in fix
    assert "matrix_transpose" in fix


def test_the_rich_report_leads_with_the_fault():
    result = invoke("run", SEED_CASES, "--engine", BUGGY)
    assert result.exit_code == 1
    out = result.stdout
    assert f"FAILED  {SEED_CASES}:" in out
    fault = out.find("fault:matmul.full-transpose")
    assert fault != -1
    vjp = out.find("op-vjp")
    assert vjp == -1 or fault < vjp
    # The wrong numbers are on screen without -v: y's gradient, for one.
    assert "[[33. 22.]" in out and "[[66. -8.]" in out
    assert out.rstrip().splitlines()[-1].startswith("1 failed in ")


def test_the_fixed_engine_passes():
    result = invoke("run", SEED_CASES, "--engine", FIXED)
    assert result.exit_code == 0, result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("1 passed in ")
