"""Configuration (SPEC §5, issue 9): `[tool.gradcheck]` of the nearest pyproject.toml or a
gradcheck.toml; paths relative to the file that set them; the command line, the Python
API and the pytest plugin share one set of defaults and one precedence: what the call
says, then the config file, then the defaults."""

from __future__ import annotations

import inspect
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gradcheck
from gradcheck.cli import app
from gradcheck.config import DEFAULTS, config_layer, resolve
from gradcheck.errors import UsageError
from gradcheck.pytest_plugin.state import State

ROOT = Path(__file__).resolve().parents[1]
pytest_plugins = ["pytester"]

NAMED_ENGINE = """\
from gradcheck.engines.builtin import BuiltinEngine


class Engine(BuiltinEngine):
    name = "{name}"
"""
CASES = """\
cases:
  - name: product
    expr: sum(x * y)
    inputs: {x: [1.0, 2.0], y: [3.0, 4.0]}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return make_project(tmp_path, monkeypatch)


def make_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose pyproject.toml names its engine and case folder, worked on from a
    subfolder: every path in the config file is relative to the file."""
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "cases.yaml").write_text(CASES)
    (tmp_path / "engines").mkdir()
    (tmp_path / "engines" / "configured.py").write_text(NAMED_ENGINE.format(name="configured"))
    (tmp_path / "given.py").write_text(NAMED_ENGINE.format(name="given"))
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.gradcheck]\npaths = ["checks"]\n'
        'engine = "engines/configured.py:Engine"\nreference = "numeric"\n'
        'cache_dir = "refs"\nstale_check_limit = 0\n'
    )
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    return tmp_path


def run_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["run", "-f", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- finding the file, reading it ----------------------------------------------------


def test_the_nearest_file_with_a_gradcheck_table_wins_up_to_the_project_root(
    tmp_path: Path,
) -> None:
    """As pytest's rootdir: the search stops at the first folder with a pyproject.toml,
    gradcheck.toml, setup.cfg or .git (issue 22: a parent folder's file once won over a
    project whose pyproject.toml has no table, and its ops files ran)."""
    (tmp_path / "pyproject.toml").write_text('[tool.gradcheck]\nengine = "outer.py"\n')
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    assert resolve(config_layer(inner)).engine == str(tmp_path / "outer.py")  # no root between
    for marker in ("pyproject.toml", "setup.cfg", ".git"):
        (tmp_path / "a" / marker).write_text('[project]\nname = "no table here"\n')
        assert config_layer(inner) is None, marker
        (tmp_path / "a" / marker).unlink()
    (tmp_path / "a" / "gradcheck.toml").write_text('engine = "builtin"\n')
    assert resolve(config_layer(inner)).engine == "builtin"
    (inner / "pyproject.toml").write_text('[tool.gradcheck]\nreference = "both"\n')
    (inner / "gradcheck.toml").write_text('reference = "numeric"\n')  # in one folder: it wins
    found = resolve(config_layer(inner))
    assert found.reference == "numeric" and found.source("reference").endswith("gradcheck.toml")
    assert found.engine == "builtin" and found.source("engine") == "default"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[tool.gradcheck]\nengin = "x.py"\n', "unknown key 'engin' (did you mean 'engine'?)"),
        ("[tool.gradcheck]\nrtol = -1\n", "rtol must be a finite number >= 0, not -1"),
        ('[tool.gradcheck]\nreference = "tf"\n', "reference must be tensorflow or numeric or both"),
        ('[tool.gradcheck]\ncache = "yes"\n', "cache must be true or false, not 'yes'"),
        ("[tool.gradcheck]\nstale_check_limit = 1.5\n", "must be a whole number >= 0"),
        ('[tool.gradcheck]\nthreads = "2"\n', 'threads must be auto, off or "REF:ENGINE"'),
        ("[tool.gradcheck\n", "not a valid TOML file"),
    ],
)
def test_a_bad_config_file_is_a_usage_error_naming_the_file_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    (tmp_path / "cases.yaml").write_text(CASES)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "cases.yaml"])
    assert result.exit_code == 2
    assert result.stderr.startswith("gradcheck: error: pyproject.toml: ")
    assert message in result.stderr


# --- the command line ----------------------------------------------------------------


def test_cli_takes_the_config_files_defaults_relative_to_it(project: Path) -> None:
    report = run_json()
    assert report["engine"] == "configured"
    assert report["reference"].startswith("numeric")
    assert [c["file"] for c in report["cases"]] == [str(project / "checks" / "cases.yaml")]
    assert (project / "refs").is_dir() and not (project / "sub" / "refs").exists()
    listed = CliRunner().invoke(app, ["list"])
    assert listed.exit_code == 0 and "::product" in listed.stdout


def test_cli_options_win_over_the_config_file(project: Path) -> None:
    (project / "sub" / "here.yaml").write_text(CASES.replace("product", "here"))
    report = run_json("here.yaml", "--engine", "../given.py", "--reference", "tensorflow")
    assert report["engine"] == "given"
    assert report["reference"].startswith("tensorflow")
    assert [c["name"] for c in report["cases"]] == ["here"]


def test_the_header_says_where_the_engine_came_from(project: Path) -> None:
    def header(*args: str) -> str:
        result = CliRunner().invoke(app, ["run", *args])
        assert result.exit_code == 0, result.output
        return " ".join(result.stdout.split())  # the header leads, however wrapped

    assert header().startswith("gradcheck: engine configured (from ../pyproject.toml),")
    assert " gradcheck: config ../pyproject.toml " in header()  # which config file was read
    assert header("-e", "../given.py").startswith("gradcheck: engine given (from --engine),")
    (project / "pyproject.toml").write_text('[tool.gradcheck]\npaths = ["checks"]\n')
    assert header().startswith("gradcheck: engine builtin (default),")
    (project / "pyproject.toml").write_text('[project]\nname = "none"\n')
    (project / "sub" / "cases").mkdir()
    (project / "sub" / "cases" / "c.yaml").write_text(CASES)
    assert " gradcheck: no config file " in header()


def test_no_cache_in_the_config_file_is_honoured_and_explained(project: Path) -> None:
    with (project / "pyproject.toml").open("a") as f:
        f.write("cache = false\n")
    run_json()
    assert not (project / "refs").exists()
    result = CliRunner().invoke(app, ["run", "--require-cache"])
    assert result.exit_code == 2
    assert "--require-cache needs the cache; ../pyproject.toml turns it off" in result.stderr
    run_json("--cache")
    assert (project / "refs").is_dir()


# --- the Python API ------------------------------------------------------------------


def test_api_takes_the_config_files_defaults_and_its_keywords_win(project: Path) -> None:
    report = gradcheck.run()
    assert (
        report.passed and report.engine == "configured" and report.reference.startswith("numeric")
    )
    assert report.engine_origin == "../pyproject.toml"
    given = gradcheck.run(engine="../given.py", reference="tensorflow")
    assert given.engine == "given" and given.reference.startswith("tensorflow")
    result = gradcheck.check("sum(x * x)", {"x": [1.0, 2.0]})
    assert result.passed and result.reference == "numeric"


def test_api_cache_is_on_by_default_as_on_the_command_line(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    gradcheck.check("sum(x * x)", {"x": [1.0, 2.0]}, reference="numeric")
    assert (tmp_path / ".gradcheck_cache").is_dir()
    shutil.rmtree(tmp_path / ".gradcheck_cache")
    gradcheck.check("sum(x * x)", {"x": [1.0, 2.0]}, reference="numeric", cache=False)
    assert not (tmp_path / ".gradcheck_cache").exists()


# --- the three agree -------------------------------------------------------------------


def cli_defaults() -> dict:
    """What `gradcheck run` shows as its defaults in --help, by option."""
    from typer.main import get_command

    command = get_command(app).commands["run"]  # type: ignore[attr-defined]
    return {p.name: p.show_default for p in command.params if p.name in DEFAULT_KEYS}


DEFAULT_KEYS = (
    "engine", "cache_dir", "reference", "stale_check_limit", "timeout", "max_elements", "threads"
)  # fmt: skip


def test_cli_api_and_plugin_defaults_are_the_one_defaults_object() -> None:
    shown = cli_defaults()
    for key in DEFAULT_KEYS:
        assert shown[key] == str(getattr(DEFAULTS, key)), key
    for function in (gradcheck.run, gradcheck.check):
        parameters = inspect.signature(function).parameters
        for key in (*DEFAULT_KEYS, "cache", "ops"):
            if key in parameters:
                assert parameters[key].default is None, (function.__name__, key)
    plugin = State(roots=[], settings=DEFAULTS).options
    cli = DEFAULTS.run_options("builtin")
    assert plugin.cache is not None and cli.cache is not None
    assert plugin.cache.directory == cli.cache.directory
    assert replace(plugin, cache=None) == replace(cli, cache=None)


ASKED_ONCE = "gradients asked for once"


@pytest.mark.parametrize(("limit", "asked_once"), [(1, True), (0, False)])
def test_the_stale_check_limit_means_the_same_to_all_three(
    pytester: pytest.Pytester, limit: int, asked_once: bool
) -> None:
    """A limit below the case's 2 input elements asks once; 0 asks twice in every case: on
    the command line, in the API and in the plugin alike, from one config file."""
    (pytester.path / "cases").mkdir()
    (pytester.path / "cases" / "c.yaml").write_text(CASES)
    (pytester.path / "gradcheck.toml").write_text(
        f'stale_check_limit = {limit}\nreference = "numeric"\n'
    )
    cli = run_json()
    assert (ASKED_ONCE in (cli["cases"][0]["message"] or "")) == asked_once
    api = gradcheck.run()
    assert (ASKED_ONCE in (api.cases[0].message or "")) == asked_once
    plugin = pytester.runpytest_subprocess("--gradcheck", "-rA", "-p", "no:cacheprovider")
    plugin.assert_outcomes(passed=1)
    for made_by in ("cli", "api", "plugin"):  # each with the cache on, in one folder
        assert (pytester.path / ".gradcheck_cache").is_dir(), made_by
    cached = gradcheck.run(cache_dir=pytester.path / "elsewhere", stale_check_limit=1)
    assert ASKED_ONCE in (cached.cases[0].message or "")  # the keyword wins


def test_a_bad_keyword_says_which(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="stale_check_limit= must be a whole number >= 0"):
        gradcheck.check("sum(x)", {"x": [1.0]}, stale_check_limit=-1)


# --- the pytest plugin ------------------------------------------------------------------


@pytest.fixture
def plugin_project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "checks").mkdir()
    (pytester.path / "checks" / "cases.yaml").write_text(CASES)
    (pytester.path / "engines").mkdir()
    (pytester.path / "engines" / "configured.py").write_text(NAMED_ENGINE.format(name="configured"))
    (pytester.path / "engines" / "ini.py").write_text(NAMED_ENGINE.format(name="ini"))
    (pytester.path / "given.py").write_text(NAMED_ENGINE.format(name="given"))
    (pytester.path / "pyproject.toml").write_text(
        '[tool.gradcheck]\npaths = ["checks"]\nengine = "engines/configured.py"\n'
        'reference = "numeric"\n'
    )
    return pytester


def header_of(result: pytest.RunResult) -> str:
    return next(line for line in result.outlines if line.startswith("gradcheck: engine"))


def test_plugin_reads_the_config_file_and_its_options_win(
    plugin_project: pytest.Pytester,
) -> None:
    run = plugin_project.runpytest_subprocess("--gradcheck", "-p", "no:cacheprovider")
    run.assert_outcomes(passed=1)
    assert header_of(run) == (
        "gradcheck: engine engines/configured.py (from pyproject.toml), case files under checks,"
        " config pyproject.toml"
    )
    run = plugin_project.runpytest_subprocess(
        "--gradcheck", "--gradcheck-engine", "given.py", "-p", "no:cacheprovider"
    )
    run.assert_outcomes(passed=1)
    assert header_of(run).startswith("gradcheck: engine given.py (from --gradcheck-engine)")


def test_plugin_ini_options_are_relative_to_the_ini_file_and_win_over_config(
    plugin_project: pytest.Pytester,
) -> None:
    """The ini file is in a folder of its own (given with -c): its engine path is found
    from there, not from where pytest was started."""
    (plugin_project.path / "ci").mkdir()
    (plugin_project.path / "ci" / "pytest.ini").write_text(
        "[pytest]\ngradcheck_engine = ../engines/ini.py\ngradcheck_paths = ../checks\n"
    )
    run = plugin_project.runpytest_subprocess("-c", "ci/pytest.ini", "-p", "no:cacheprovider")
    run.assert_outcomes(passed=1)
    assert header_of(run).startswith(
        "gradcheck: engine engines/ini.py (from gradcheck_engine in pytest.ini)"
    )
