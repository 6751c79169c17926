"""Small files cannot exhaust the loader: every hostile file below is refused (or loaded)
within a time and memory budget the test records, and its valid neighbours still load.

The budgets are generous (machines here are noisy): each would be exceeded many times
over by the failure it guards against (minutes, gigabytes)."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcheck import InvalidCaseError, check
from gradcheck.cases import Case, InvalidCase, load_file, load_paths
from gradcheck.cases.loader import INTERNAL
from gradcheck.cli import app
from gradcheck.errors import UsageError

SECONDS, MEGABYTES = 10.0, 100
CLI = [sys.executable, "-c", "from gradcheck.cli import main; main()"]


def within_budget(
    fn: Callable[[], Any], seconds: float = SECONDS, megabytes: float = MEGABYTES
) -> Any:
    """`fn()`, asserting it took under `seconds` and allocated under `megabytes` at its
    peak (as tracemalloc counts, which also slows Python code down a few times)."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = fn()
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    assert elapsed < seconds, f"took {elapsed:.1f} s"
    assert peak < megabytes, f"peaked at {peak:.0f} MB"
    return result


def write(tmp_path: Path, text: str, name: str = "cases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


NEIGHBOUR = """\
  - name: neighbour
    expr: x * 2.0
    inputs: {x: [1.0, 2.0]}
"""

LOL = ", ".join(["lol"] * 9)
BOMB = "\n".join(
    [f"      l0: &l0 [{LOL}]"]
    + [f"      l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
)


@pytest.mark.parametrize(
    "where",
    [
        f"    junk:\n{BOMB}\n",  # under an unknown key: only check_read walked it
        f"    expect:\n{BOMB}\n      x: *l9\n",  # as literal values
    ],
    ids=["unknown-key", "literal"],
)
def test_an_alias_bomb_is_refused_at_its_line(tmp_path, where) -> None:
    text = f"cases:\n{NEIGHBOUR}  - name: bomb\n    expr: x\n    inputs: {{x: [1.0]}}\n{where}"
    path = tmp_path / "bomb.yaml"
    path.write_text(text + NEIGHBOUR.replace("neighbour", "after"))
    neighbour, bomb, after = within_budget(lambda: load_file(path))
    assert isinstance(neighbour, Case) and isinstance(after, Case)
    assert isinstance(bomb, InvalidCase)
    assert "expands to more than" in bomb.message and bomb.line > 4


def test_a_value_that_contains_itself_is_refused(tmp_path) -> None:
    path = write(tmp_path, "cases:\n  - &me {name: loop, expr: x, inputs: {x: *me}}\n")
    (loop,) = within_budget(lambda: load_file(path))
    assert "contains an alias of itself" in loop.message


def test_twenty_thousand_bindings_load_in_linear_time(tmp_path) -> None:
    chain = "\n".join(f"      h{i + 1} = h{i} * 1.0" for i in range(20_000))
    path = write(
        tmp_path,
        f"cases:\n  - name: chain\n    inputs: {{x: [1.0]}}\n    expr: |\n"
        f"      h0 = x * 1.0\n{chain}\n      h20000\n",
    )
    # 40,000 nodes: ~3 s and ~80 MB under tracemalloc; before, 1,000 bindings took 20 s
    # and 20,000 never finished.
    (case,) = within_budget(lambda: load_file(path), seconds=60, megabytes=300)
    assert isinstance(case, Case) and len(case.expression.nodes) == 40_003
    assert case.expression.nodes[-1].text == "h19999 * 1.0"


def test_a_wide_case_is_refused_by_the_case_total_before_anything_is_drawn(tmp_path) -> None:
    inputs = ", ".join(f"x{i}: {{shape: [3000, 3000]}}" for i in range(10))
    expr = " + ".join(f"sum(x{i})" for i in range(10))
    path = write(tmp_path, f"cases:\n  - name: wide\n    expr: {expr}\n    inputs: {{{inputs}}}\n")
    (wide,) = within_budget(lambda: load_file(path))
    assert isinstance(wide, InvalidCase)
    assert "above the limit of 50,000,000 per case" in wide.message


def test_random_inputs_are_drawn_when_the_case_runs_not_at_load(tmp_path) -> None:
    path = write(
        tmp_path,
        "cases:\n  - name: big\n    expr: sum(x)\n    inputs: {x: {shape: [2000, 2000]}}\n",
    )
    (case,) = within_budget(lambda: load_file(path))  # 32 MB once drawn
    assert case._drawn is None
    drawn = case.inputs["x"]
    assert drawn.shape == (2000, 2000) and case._drawn is not None
    case.release()
    assert case._drawn is None
    assert np.array_equal(case.inputs["x"], drawn)  # again, bit for bit


def test_the_run_total_refuses_the_cases_past_it(tmp_path) -> None:
    one = "  - name: c{i}\n    expr: sum(x)\n    inputs: {{x: {{shape: [10]}}}}\n"
    path = write(tmp_path, "cases:\n" + "".join(one.format(i=i) for i in range(120)))
    # Each case holds 11 elements (x, then sum(x)); with --max-elements 11 a run holds
    # 100 x 11 of them: 100 cases.
    items = load_paths([path], max_elements=11)
    assert [isinstance(i, Case) for i in items] == [True] * 100 + [False] * 20
    assert "the most one run checks" in items[100].message


def read_with_deadline(path: Path) -> list[Case | InvalidCase]:
    """`load_file`, failing the test (not hanging it) if it blocks."""
    out: list = []
    reader = threading.Thread(target=lambda: out.append(load_file(path)), daemon=True)
    reader.start()
    reader.join(SECONDS)
    assert out, f"load_file({path}) blocked"
    return out[0]


def test_a_fifo_named_like_a_case_file_is_refused_without_blocking(tmp_path) -> None:
    os.mkfifo(tmp_path / "x.yaml")
    (item,) = read_with_deadline(tmp_path / "x.yaml")
    assert item.message.startswith("not a regular file (a FIFO)")


def test_a_case_file_linked_to_dev_zero_is_refused(tmp_path) -> None:
    (tmp_path / "z.yaml").symlink_to("/dev/zero")
    (item,) = read_with_deadline(tmp_path / "z.yaml")
    assert item.message.startswith("not a regular file (a device)")


def test_a_file_over_the_size_cap_is_refused_before_parsing(tmp_path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as f:
        f.truncate(10_000_001)  # sparse: costs no disk
    (item,) = within_budget(lambda: load_file(path))
    assert "above the limit of 10,000,000" in item.message


# -- values YAML builds that used to crash the loader --------------------------------

VALUES = {
    "int tag": ("seed: !!int abc", "'abc' cannot be read as !!int"),
    "float tag": ("inputs: {x: [!!float abc]}", "'abc' cannot be read as !!float"),
    "bool tag": ("tags: [!!bool maybe]", "'maybe' cannot be read as !!bool"),
    "timestamp tag": ("description: !!timestamp x", "tag !!timestamp is not allowed"),
    "binary tag": ("description: !!binary aGk=", "tag !!binary is not allowed"),
    "python tag": ("description: !!python/object:os.system x", "is not allowed"),
    "5000 digits": (f"seed: {'9' * 5000}", "cannot be read as !!int"),
    "huge axis": ("inputs: {x: {shape: [0, 1000000000000000000000000000000]}}", "limit"),
    "literal too large": (f"expr: x * 1{'0' * 400}", "too large for a float"),
    "rank via reshape": (f"expr: reshape(x, [2{', 1' * 39}])", "more than 32"),
    "rank via expand_dims": (
        "expr: " + "expand_dims(" * 40 + "x" + ", axis=0)" * 40,
        "more than 32",
    ),
    "float axis": ("expr: sum(x, axis=1.5)", "x"),
    "infinite atol": ("tolerance: {atol: .inf}", "tolerance atol must be finite"),
    "map as a scalar": ("cotangent: !!map x", "cannot be read as !!map"),
}


@pytest.mark.parametrize("line, words", VALUES.values(), ids=VALUES)
def test_a_value_that_cannot_be_used_is_a_problem_at_its_line(tmp_path, line, words) -> None:
    body = {"expr": "expr: x * 2.0", "inputs": "inputs: {x: [1.0, 2.0]}"}
    key = line.split(":")[0]
    body[key] = line
    case = "  - name: odd\n" + "".join(f"    {v}\n" for v in body.values())
    path = write(tmp_path, f"cases:\n{NEIGHBOUR}{case}{NEIGHBOUR.replace('neighbour', 'after')}")
    neighbour, odd, after = within_budget(lambda: load_file(path))
    assert isinstance(neighbour, Case) and isinstance(after, Case)
    assert isinstance(odd, InvalidCase), odd
    assert words in odd.message and INTERNAL not in odd.message
    assert odd.line >= 5


def test_an_infinite_tolerance_override_is_a_usage_error(tmp_path) -> None:
    path = write(tmp_path, f"cases:\n{NEIGHBOUR}")
    result = CliRunner().invoke(app, ["run", str(path), "--atol", "inf", "--no-cache"])
    assert result.exit_code == 2 and "--atol must be a finite number" in result.stderr
    with pytest.raises(UsageError):
        load_paths([path], rtol=math.inf)


def test_check_takes_numpy_dtypes_and_still_refuses_infinite_tolerances() -> None:
    for dtype in (np.dtype("float64"), np.float32):
        assert check("x * 2.0", {"x": [1.0, 2.0]}, dtype=dtype).passed
    with pytest.raises(InvalidCaseError, match="finite"):
        check("x * 2.0", {"x": [1.0]}, tolerance={"atol": math.inf})


# -- folders and files that cannot be read --------------------------------------------


def without_root_s_privileges() -> list[str]:
    """A command prefix under which file permissions apply, as they do not to root."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):  # util-linux, on every Debian
        pytest.skip("running as root without setpriv to drop the file-access capabilities")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def test_an_unreadable_folder_or_file_is_reported_never_skipped(tmp_path) -> None:
    cases = tmp_path / "cases"
    (cases / "locked").mkdir(parents=True)
    write(cases / "locked", f"cases:\n{NEIGHBOUR}", "hidden.yaml")
    write(cases, f"cases:\n{NEIGHBOUR}", "fine.yaml")
    write(cases, f"cases:\n{NEIGHBOUR}", "secret.yaml")
    for path in (cases, cases / "fine.yaml"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(cases / "locked", 0o000)
    os.chmod(cases / "secret.yaml", 0o000)
    done = subprocess.run(
        [*without_root_s_privileges(), *CLI, "list", "cases"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 2, done.stderr
    assert "cases/locked:1: cannot read the folder: Permission denied" in done.stderr
    assert "cases/secret.yaml:1: cannot read the file: Permission denied" in done.stderr
    assert "fine.yaml" in done.stdout
