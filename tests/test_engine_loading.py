"""Engines load like user code (issue 9): a file's folder is first on `sys.path` while it
imports (in this process and in the worker processes), a `module:Class` is found from the
working directory too, and an engine that cannot be imported shows the user's frames
only, its file and line first, and exits 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcheck.cli import app
from gradcheck.engines.loading import load_engine
from gradcheck.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
TINY = (ROOT / "examples" / "tiny_engine.py").read_text()
CASE = """\
cases:
  - name: mul_sum
    expr: sum(exp(x) * y)
    inputs: {x: {shape: [2, 3]}, y: {shape: [2, 3]}}
"""


def two_file_engine(folder: Path, module: str = "nodes_for_test") -> Path:
    """examples/tiny_engine.py split in two: the engine class imports its node type."""
    folder.mkdir(parents=True, exist_ok=True)
    engine_at = TINY.index("class Engine")
    (folder / f"{module}.py").write_text("import numpy as np\n\n\n" + TINY[:engine_at])
    helpers = f"import numpy as np\n\nfrom {module} import Var, unbroadcast\n\n\n"
    engine = folder / "two_file_engine.py"
    engine.write_text(helpers + TINY[engine_at:])
    (folder / "cases.yaml").write_text(CASE)
    return engine


@pytest.fixture
def fresh_modules(tmp_path):
    """Drop the modules a test imports from its own folder, and restore `sys.path`."""
    path = list(sys.path)
    yield
    sys.path[:] = path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.mark.parametrize("isolate", ["process", "none"])
def test_a_two_file_engine_imports_its_sibling(tmp_path, monkeypatch, fresh_modules, isolate):
    two_file_engine(tmp_path / "engine", module=f"nodes_{isolate}")
    monkeypatch.chdir(tmp_path)  # not the engine's folder: only --engine's path leads there
    result = CliRunner().invoke(
        app,
        ["run", "engine/cases.yaml", "--engine", "engine/two_file_engine.py", "--isolate",
         isolate, "--no-cache", "-f", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert '"passed": 1' in result.stdout and '"engine": "tiny"' in result.stdout
    if isolate == "none":
        sibling = sys.modules["nodes_none"].__file__
        assert sibling == str(tmp_path / "engine" / "nodes_none.py")


def test_the_files_folder_is_first_while_importing_then_last(tmp_path, fresh_modules):
    """A sibling wins over an installed module of the same name while the engine imports;
    afterwards the folder shadows nothing, but imports inside methods still find it."""
    (tmp_path / "json.py").write_text("SIBLING = True\n")  # shadows the standard library's
    engine = tmp_path / "shadowing_engine.py"
    engine.write_text(
        "import sys\nimport json\nFIRST = sys.path[0]\n\n"
        "class Engine:\n    def leaf(self, name, value): ...\n"
        "    def value(self, node): ...\n    def grad(self, output, wrt, cotangent): ...\n"
    )
    saved_json = sys.modules.pop("json")
    try:
        factory = load_engine(str(engine))
        module = sys.modules[factory.__module__]
        assert str(tmp_path) == module.FIRST
        assert module.json.SIBLING
    finally:
        sys.modules["json"] = saved_json
    assert sys.path[0] != str(tmp_path) and sys.path[-1] == str(tmp_path)


def test_module_class_resolves_from_the_working_directory(tmp_path, monkeypatch, fresh_modules):
    two_file_engine(tmp_path, module="nodes_cwd")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    factory = load_engine("two_file_engine:Engine")
    assert factory.name == "tiny"
    result = CliRunner().invoke(
        app, ["run", "cases.yaml", "--engine", "two_file_engine:Engine", "--no-cache"]
    )
    assert result.exit_code == 0, result.output
    assert "1 passed" in result.stdout


def test_a_module_that_is_nowhere_says_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as info:
        load_engine("gc_nowhere_engine:Engine")
    assert "cannot import module 'gc_nowhere_engine'" in str(info.value)
    assert f"in the working directory, {tmp_path}" in str(info.value)


@pytest.mark.parametrize("isolate", ["process", "none"])
def test_a_syntax_error_shows_the_users_file_and_line_first(tmp_path, monkeypatch, isolate):
    engine = tmp_path / "broken_engine.py"
    engine.write_text("class Engine:\n    name = 'x'\n    def leaf(self, name, value)\n")
    (tmp_path / "cases.yaml").write_text(CASE)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app, ["run", "cases.yaml", "--engine", "broken_engine.py", "--isolate", isolate]
    )
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("gradcheck: error: broken_engine.py:3: SyntaxError: ")
    assert "def leaf(self, name, value)" in result.stderr
    assert "importlib" not in result.stderr and "gradcheck/" not in result.stderr
    assert result.stdout == ""


def failed_import(tmp_path: Path, monkeypatch, files: dict[str, str], spec: str):
    """`gradcheck run --engine spec` over `files` (written under tmp_path, the working
    directory): its exit code, the first line of stderr, the files of the frames shown
    after it, and the rest."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "cases.yaml").write_text(CASE)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "cases.yaml", "--engine", spec])
    head, *rest = result.stderr.splitlines()
    frames = [line for line in rest if line.lstrip().startswith("File ")]
    return result.exit_code, head, [Path(f.split('"')[1]).name for f in frames], rest


def test_an_import_error_in_a_sibling_shows_the_users_frames_only(tmp_path, monkeypatch):
    files = {
        "helpers_that_fail.py": "import math\n\nVALUE = math.nope\n",
        "engine_with_helpers.py": "from helpers_that_fail import VALUE\n\nclass Engine: ...\n",
    }
    code, head, frames, rest = failed_import(tmp_path, monkeypatch, files, "engine_with_helpers.py")
    assert code == 2
    assert head == (
        "gradcheck: error: helpers_that_fail.py:3: AttributeError: "
        "module 'math' has no attribute 'nope'"
    )
    assert frames == ["engine_with_helpers.py", "helpers_that_fail.py"]
    assert rest[-1].strip() in ("VALUE = math.nope", "^^^^^^^^^")  # carets on 3.11+


def test_a_module_engine_that_fails_to_import_shows_no_importlib_frame(
    tmp_path, monkeypatch, fresh_modules
):
    """`--engine pkg.mod:Class` goes through `importlib.import_module`, whose frame (a file,
    not a frozen module) is not the user's."""
    files = {"gc_pkg_engine/engine.py": "from tape_not_there import Var\n\nclass Engine: ...\n"}
    code, head, frames, rest = failed_import(tmp_path, monkeypatch, files, "gc_pkg_engine.engine")
    assert code == 2
    assert head == (
        f"gradcheck: error: {Path('gc_pkg_engine', 'engine.py')}:1: ModuleNotFoundError: "
        "No module named 'tape_not_there'"
    )
    assert frames == ["engine.py"]
    assert not any("importlib" in line for line in rest)
