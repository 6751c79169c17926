"""One case written as a case file and loaded, as a user's would be: the tests' way to
make a case without a suite of its own."""

from __future__ import annotations

from pathlib import Path

import yaml

from gradcheck.cases import Case, load_file


def make_case(tmp_path: Path, expr: str, inputs: dict, name: str = "c", **settings) -> Case:
    """One case (random cotangent, float64 unless `settings` say otherwise), loaded."""
    spec = {"name": name, "expr": expr, "inputs": inputs, "cotangent": "random", **settings}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"cases": [spec]}, sort_keys=False))
    [case] = load_file(path)
    assert isinstance(case, Case), case.message
    return case
