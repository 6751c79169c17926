"""gradcheck installs as any Python tool does (issue 9): `pip install .` and a wheel that
`python -m build` makes each give a `gradcheck` command and `python -m gradcheck`.

Each test installs a copy of the project's files into a fresh virtual environment, with
`--no-deps` and no index (quick, offline): the environment finds the dependencies in this
one's site-packages, after its own, so the gradcheck it imports is the one installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

from gradcheck import __version__

ROOT = Path(__file__).resolve().parents[1]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]


def project_copy(into: Path) -> Path:
    """The project's packaging inputs (no build leftovers), where building cannot race the
    work tree."""
    into.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, into / name)
    shutil.copytree(
        ROOT / "src", into / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    return into


def fresh_venv(path: Path) -> Path:
    """A new environment whose own site-packages come first, then this one's (for numpy,
    typer, rich: the dependencies `--no-deps` did not install). Lines of a `.pth` file are
    appended to `sys.path` as they are: this environment's own `.pth` files, such as the
    editable install of the work tree, are not read."""
    venv.create(path, with_pip=False)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "outer_site_packages.pth").write_text(sysconfig.get_paths()["purelib"])
    return python


def install(python: Path, what: str | Path) -> None:
    subprocess.run(
        [*PIP, "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", str(what)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip


def assert_installed(python: Path, cwd: Path) -> None:
    """Both ways of calling it print the version, from the installed copy's files."""
    bin_dir = python.parent
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for command in ([bin_dir / "gradcheck", "--version"], [python, "-m", "gradcheck", "--version"]):
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"gradcheck {__version__}\n"
    where = subprocess.run(
        [python, "-c", "import gradcheck, pathlib; print(pathlib.Path(gradcheck.__file__))"],
        cwd=cwd, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(python.parents[1])  # not the work tree's src/
    assert (Path(where).parent / "py.typed").is_file()
    assert (Path(where).parent / "__main__.py").is_file()


def test_pip_install_dot_gives_the_command_and_python_m(tmp_path: Path) -> None:
    source = project_copy(tmp_path / "gradcheck")
    python = fresh_venv(tmp_path / "venv")
    install(python, source)
    assert_installed(python, cwd=tmp_path)


def test_a_built_wheel_installs_the_same(tmp_path: Path) -> None:
    source = project_copy(tmp_path / "gradcheck")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
         str(tmp_path / "dist"), str(source)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("gradcheck-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = archive.read(points).decode()
    assert "gradcheck/py.typed" in names and "gradcheck/__main__.py" in names
    assert "gradcheck = gradcheck.cli:main" in entry_points
    assert "gradcheck = gradcheck.pytest_plugin" in entry_points  # the pytest11 plugin
    python = fresh_venv(tmp_path / "venv")
    install(python, wheel)
    assert_installed(python, cwd=tmp_path)
