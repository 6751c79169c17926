"""`TracedCheck.save_case`: a traced check kept as an ordinary case file, to join a YAML
suite in CI.

The case file holds the expression (the user's lines as comments), every input's values
(the differentiated ones and the constants the function captured), `wrt`, the dtype,
the reference the check used and the options it was given; its name and seed draw the
same random cotangent. Where the trace has opaque nodes or cuts, an ops file beside it
declares them and defines the engine that runs them (`torch_saved`); the case's
description and the ops file's docstring say the command that runs the two.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from ..util.atomic import write_atomic
from .opaque import cuts
from .program import TraceError, case_input

if TYPE_CHECKING:
    from .results import TracedCheck

_OPTIONS = ("seed", "cotangent", "tolerance", "modes", "order")


def save_case(check: TracedCheck, path: Path) -> list[Path]:
    """Write `check` as the case file `path` (and its ops file); the files written."""
    if path.suffix not in (".yaml", ".yml"):
        raise TraceError(f"save_case writes a case file: name it *.yaml, not {path.name}")
    program = check.program
    needs_ops = bool(program.opaque) or bool(cuts(program))
    ops_file = path.with_name(f"{path.stem}_ops.py") if needs_ops else None
    command = ["gradcheck", "run", str(path)]
    if ops_file is not None:
        command += ["--ops", str(ops_file), "--engine", f"{ops_file}:Engine"]
    elif check.framework == "torch":
        command += ["--engine", "torch"]
    else:
        command += ["--engine", "jax"]
    said = shlex.join(command)
    written = []
    if ops_file is not None:
        writer = _ops_writer(check.framework)
        write_atomic(ops_file, writer(program, check.case.name, ops_file, said))
        written.append(ops_file)
    write_atomic(path, _case_text(check, said))
    written.append(path)
    return written


def _ops_writer(framework: str) -> Any:
    if framework == "torch":
        from .torch_saved import ops_file_text
    else:
        from .jax_saved import ops_file_text
    return ops_file_text


def _case_text(check: TracedCheck, command: str) -> str:
    program, case = check.program, check.case
    data: dict[str, Any] = {
        "name": case.name,
        "description": f"{case.name}, traced by gradcheck.{check.framework}.check at "
        f"{case.location}; run it with: {command}",
        "expr": _Block(program.source),
        "dtype": program.dtype,
        "inputs": {name: _values(value) for name, value in program.inputs.items()},
        "wrt": list(program.wrt),
        "reference": case.reference,
    }
    data.update({k: v for k, v in check.options.items() if k in _OPTIONS and v is not None})
    header = f"# {case.name}, traced by gradcheck.{check.framework}.check.\n#   {command}\n"
    text = yaml.dump(
        {"cases": [data]}, Dumper=_Dumper, sort_keys=False, width=88, default_flow_style=None
    )
    return header + text


def _values(value: np.ndarray) -> Any:
    """An input as the case file writes it: the case's (`case_input`), arrays as lists of
    numbers (float32's are float64 numbers exactly)."""
    given = case_input(value)
    return given if isinstance(given, dict) else np.asarray(given, np.float64).tolist()


class _Block(str):
    """A string written as a YAML literal block (the expression, line by line)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    _Block, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")
)
