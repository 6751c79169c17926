"""A config file is untrusted data until it names code (issue 22, item 3): the search for
it stops at the project's root, every valid TOML spelling of ``[tool.gradcheck]`` is
found, and a hostile file (huge, deep, a device, a FIFO) is a clean exit 2, never a
traceback or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck.config import config_layer, resolve

CASES = """\
cases:
  - name: product
    expr: sum(x * y)
    inputs: {x: [1.0, 2.0], y: [3.0, 4.0]}
"""
# An ops file that leaves a mark when it is imported: it must not be.
MARKING_OPS = "from pathlib import Path\nPath({marker!r}).write_text('ran')\n"


def gradcheck(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gradcheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_a_config_file_above_the_project_root_is_not_read_nor_its_ops_run(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marker"
    (tmp_path / "evil_ops.py").write_text(MARKING_OPS.format(marker=str(marker)))
    (tmp_path / "gradcheck.toml").write_text('ops = ["evil_ops.py"]\nengine = "evil.py"\n')
    project = tmp_path / "project"
    (project / "cases").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "mine"\n')
    (project / "cases" / "c.yaml").write_text(CASES)
    listed = gradcheck(project, "list")
    assert listed.returncode == 0, listed.stderr
    assert "cases/c.yaml:2::product" in listed.stdout  # the project's own cases still list
    ran = gradcheck(project, "run", "--reference", "numeric", "--no-cache")
    assert ran.returncode == 0, ran.stderr
    assert "engine builtin (default)" in ran.stdout and "no config file" in ran.stdout
    assert not marker.exists()


@pytest.mark.parametrize(
    "text",
    [
        '[tool]\ngradcheck.engine = "mine.py"\n',  # a dotted key under [tool]
        'tool = {gradcheck = {engine = "mine.py"}}\n',  # inline tables
        'tool.gradcheck = {engine = "mine.py"}\n',
        '[tool."gradcheck"]\nengine = "mine.py"\n',  # quoted keys
        "['tool'.gradcheck]\nengine = 'mine.py'\n",
        '[tool.\tgradcheck]\nengine = "mine.py"\n',  # a tab in the header
        '[ tool . gradcheck ]\nengine = "mine.py"\n',
        '[tool.other]\nx = 1\n[tool.gradcheck]\nengine = "mine.py"\n',
    ],
)
def test_every_valid_toml_spelling_of_the_table_is_found(tmp_path: Path, text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text + '\n[project]\nname = "x"\n')
    found = resolve(config_layer(tmp_path))
    assert found.engine == str(tmp_path / "mine.py")
    assert found.config is not None and found.config.endswith("pyproject.toml")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("pyproject.toml", 'tool = "gradcheck"\n', "'tool' must be a table, not 'gradcheck'"),
        ("pyproject.toml", "[tool]\ngradcheck = 3\n", "[tool.gradcheck] must be a table, not 3"),
        ("gradcheck.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n", "too deep"),
        ("gradcheck.toml", "x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n", "too deep"),
        ("gradcheck.toml", "paths = " + "[" * 200 + "]" * 200 + "\n", "must be a list of paths"),
        ("gradcheck.toml", f"# {'x' * (1 << 20)}\n", "over 1,048,576 bytes, not read"),
        ("gradcheck.toml", b"engine = '\xff'\n", "not UTF-8"),
    ],
)
def test_a_hostile_config_file_is_exit_2_with_its_name(
    tmp_path: Path, name: str, text: str | bytes, message: str
) -> None:
    marker = tmp_path / "marker"
    (tmp_path / "evil_ops.py").write_text(MARKING_OPS.format(marker=str(marker)))
    data = text if isinstance(text, bytes) else text.encode()
    if name == "gradcheck.toml":  # a valid key beside the hostile one: its ops never run
        data = b'ops = ["evil_ops.py"]\n' + data
    (tmp_path / name).write_bytes(data)
    result = gradcheck(tmp_path, "list")
    assert result.returncode == 2, result.stderr
    assert name in result.stderr and message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr) < 2000
    assert not marker.exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_config_file_that_is_no_regular_file_is_refused_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    """A FIFO would block a plain read forever (deaf to SIGINT); /dev/zero never ends."""
    project = tmp_path / "project"
    (project / "cases").mkdir(parents=True)
    (project / "cases" / "c.yaml").write_text(CASES)
    path = project / "gradcheck.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    result = gradcheck(project, "run", "--no-cache", "--reference", "numeric", timeout=30)
    assert result.returncode == 2, result.stderr
    assert "gradcheck.toml: not a regular file, not read" in result.stderr
    assert "Traceback" not in result.stderr
