"""The config file reaches every command (issue 9): `fuzz`, `ops`, `schema` and
`init-engine` read its engine, ops files and reference as `run` does, the command line
winning over it and it over the defaults; an engine the config file set is named so in
every error, wherever it is loaded; the JSON report says where the engine came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import gradcheck
from gradcheck.cli import app
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.errors import UsageError
from test_config import make_project, run_json

pytest_plugins = ["pytester"]

OPS = '''
import gradcheck


@gradcheck.op(shape=gradcheck.same_shape, vjps=[lambda g, ans, x: {n} * g])
def {name}(x):
    """{n} * x"""
    return {n} * x
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`test_config`'s project, whose config file also names an ops file (`twice`);
    another ops file (`thrice`) is not named."""
    root = make_project(tmp_path, monkeypatch)
    (root / "my_ops.py").write_text(OPS.format(name="twice", n=2))
    (root / "other_ops.py").write_text(OPS.format(name="thrice", n=3))
    with (root / "pyproject.toml").open("a") as f:
        f.write('ops = ["my_ops.py"]\n')
    return root


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def set_engine(root: Path, line: str) -> None:
    """The config file's engine line replaced by `line` ("" to set none)."""
    config = root / "pyproject.toml"
    kept = [x for x in config.read_text().splitlines() if not x.startswith("engine = ")]
    config.write_text("\n".join([*kept, line]) + "\n")


def fuzz_json(*args: str) -> dict:
    result = invoke("fuzz", "--max-examples", "3", "--seed", "0", "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_fuzz_reads_the_config_file_and_its_options_win(project: Path) -> None:
    # The command line's ops file first, while the config file's op is not yet loaded.
    given = fuzz_json("-e", "../given.py", "--ops", "../other_ops.py", "--ops", "thrice")
    assert given["engine"] == "given" and given["ops"] == ["thrice"]
    instead = invoke("fuzz", "--ops", "../other_ops.py", "--ops", "twice", "--max-examples", "1")
    assert instead.exit_code == 2 and "unknown op 'twice'" in instead.stderr
    configured = fuzz_json("--ops", "twice")
    assert configured["engine"] == "configured" and configured["ops"] == ["twice"]
    assert configured["reference"].startswith("numeric")
    assert not (project / "refs").exists()  # fuzz keeps no cache without --cache-dir
    api = gradcheck.fuzz(ops=["twice"], max_examples=3)
    assert (api.engine, api.reference[:7], api.ops) == ("configured", "numeric", ("twice",))
    assert gradcheck.fuzz("../given.py", ops=["mul"], max_examples=3).engine == "given"
    assert fuzz_json("--ops", "mul", "--reference", "tensorflow")["reference"].startswith(
        "tensorflow"
    )
    (project / "pyproject.toml").unlink()
    default = fuzz_json("--ops", "mul")
    assert default["engine"] == "builtin" and default["reference"].startswith("tensorflow")


def test_ops_reads_the_config_files_engine_and_ops_files(project: Path) -> None:
    given = invoke("ops", "--ops", "../other_ops.py", "-e", "../given.py")
    assert given.exit_code == 0, given.output
    names = [line.split("(")[0] for line in given.stdout.splitlines()]
    assert "thrice" in names and "twice" not in names
    assert given.stdout.strip().splitlines()[-1].startswith("engine ../given.py implements")
    configured = invoke("ops")
    assert configured.exit_code == 0, configured.output
    assert "twice" in [line.split("(")[0] for line in configured.stdout.splitlines()]
    last = configured.stdout.strip().splitlines()[-1]
    assert last.startswith("engine ") and "configured.py:Engine implements" in last
    set_engine(project, "")
    assert "implements" not in invoke("ops").stdout  # no engine named: no engine column


def test_schema_and_init_engine_read_the_config_files_ops_files(project: Path) -> None:
    schema = json.loads(invoke("schema").stdout)
    reserved = schema["$defs"]["case"]["properties"]["inputs"]["propertyNames"]["not"]["enum"]
    assert "twice" in reserved
    assert invoke("init-engine", "mine.py").exit_code == 0
    assert "def twice(self" in Path("mine.py").read_text()


def test_an_engine_the_config_file_set_is_named_so_in_every_error(project: Path) -> None:
    set_engine(project, 'engine = "engines/missing.py"')
    said = "missing.py' (from ../pyproject.toml): no such file"
    for args in (["run"], ["run", "--isolate", "none"], ["fuzz"], ["ops"]):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith("gradcheck: error: engine '"), args
        assert said in result.stderr, args
    with pytest.raises(UsageError, match=r"missing\.py' \(from \.\./pyproject\.toml\): no such"):
        gradcheck.run()
    given = invoke("run", "-e", "../missing.py")
    assert given.stderr.startswith("gradcheck: error: --engine ../missing.py: no such file")
    # Loaded in a worker process (any engine but the builtin one), named the same way.
    set_engine(project, 'engine = "engines/configured.py:Nope"')
    result = invoke("run")
    assert result.exit_code == 2
    assert "configured.py:Nope' (from ../pyproject.toml): " in result.stderr
    assert "has no class 'Nope'" in result.stderr


def test_the_plugin_names_an_engine_its_ini_file_set(pytester: pytest.Pytester) -> None:
    (pytester.path / "cases").mkdir()
    (pytester.path / "cases" / "c.yaml").write_text("cases:\n  - {name: c, expr: sum(x), "
                                                    "inputs: {x: [1.0]}}\n")  # fmt: skip
    (pytester.path / "pytest.ini").write_text("[pytest]\ngradcheck_engine = missing.py\n")
    run = pytester.runpytest_subprocess("--gradcheck", "-p", "no:cacheprovider")
    run.assert_outcomes(failed=1)
    run.stdout.fnmatch_lines(
        ["*gradcheck: engine 'missing.py' (from gradcheck_engine in pytest.ini): no such file"]
    )


def test_the_json_report_says_where_the_engine_came_from(project: Path) -> None:
    """`engine_origin`, beside `engine` (an addition to SPEC §7): the option, the config
    file (as the header shows it), the API's keyword, or "default"."""
    assert run_json()["engine_origin"] == "../pyproject.toml"
    assert run_json("-e", "../given.py")["engine_origin"] == "--engine"
    assert gradcheck.run().engine_origin == "../pyproject.toml"
    assert gradcheck.run(engine=BuiltinEngine, isolate="none").engine_origin == "engine="
    set_engine(project, "")
    report = run_json()
    assert (report["engine"], report["engine_origin"]) == ("builtin", "default")
    assert list(report)[:4] == ["tool", "version", "engine", "engine_origin"]


def test_the_fuzz_json_report_says_where_the_engine_came_from_as_run_does(
    project: Path,
) -> None:
    """`gradcheck fuzz --format json` has `engine_origin` beside `engine`, from the same
    place as `gradcheck run`'s: the option, the config file, the API's keyword, default."""
    for args, origin in ([], "../pyproject.toml"), (["-e", "../given.py"], "--engine"):
        report = fuzz_json("--ops", "mul", *args)
        assert report["engine_origin"] == origin == run_json(*args)["engine_origin"]
    assert list(report)[:5] == ["tool", "version", "command", "engine", "engine_origin"]
    assert gradcheck.fuzz(ops=["mul"], max_examples=3).engine_origin == "../pyproject.toml"
    assert gradcheck.fuzz(BuiltinEngine, ops=["mul"], max_examples=3).engine_origin == "engine="
    set_engine(project, "")
    report = fuzz_json("--ops", "mul")
    assert (report["engine"], report["engine_origin"]) == ("builtin", "default")


def test_the_fuzz_header_says_where_the_engine_came_from_as_run_s_does(project: Path) -> None:
    fuzzed = invoke("fuzz", "--ops", "mul", "--max-examples", "3", "--seed", "0")
    ran = invoke("run")
    assert fuzzed.exit_code == 0 and ran.exit_code == 0, fuzzed.output + ran.output
    named = "engine configured (from ../pyproject.toml)"
    assert fuzzed.stdout.startswith(f"gradcheck fuzz: {named}, reference ")
    assert f"gradcheck: {named}, reference" in ran.stdout
