"""A found bug as an ordinary case file, which ``gradcheck run DIR --engine ...`` reproduces.

One file per bug, named after it (``fault-matmul.full-transpose.yaml``), its case named
the same. A comment on top says how the bug was found, what the diagnosis says, and the
command that reproduces it. Inputs are written as literal lists: the fuzzer draws them
on a grid that every dtype holds exactly, so the file gives the very arrays it checked.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from ..ops.user import ops_files_declaring
from ..util.atomic import write_atomic
from .search import BugKey, Finding, describe

FIRST_CASE_LINE = 6  # the line of `- name:` in a written file (the comment has four lines)


def case_name(key: BugKey) -> str:
    """A case name (SPEC §2: ``[A-Za-z0-9_.-]+``) that says which bug it shows."""
    code, op = key
    text = code if op is None or op in code else f"{code}-{op}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "bug"


def case_data(finding: Finding) -> dict[str, Any]:
    return {**finding.example.data, "name": case_name(finding.key)}


def case_file_text(finding: Finding, *, seed: int, options: str, path: str) -> str:
    """The case file; `options` are what `gradcheck run` needs beside the file to check
    the case as the fuzzer did (`reproduce_options`)."""
    data = case_data(finding)
    result = finding.result
    said = f"{describe(finding.key)}: {result.hints[0].message}" if result.hints else ""
    found = plural(finding.after_examples, "example")
    lines = [
        f"# Found by gradcheck fuzz (--seed {seed}) after {found}, "
        f"shrunk in {plural(finding.shrink_steps, 'step')}.",
        f"# {_one_line(said or f'{result.status}: {result.message}')}",
        "# Reproduce:",
        f"#   gradcheck run {shlex.quote(path)}{' ' if options else ''}{options}",
        "cases:",
        f"  - name: {data['name']}",
        *_field("expr", data["expr"]),
        f"    dtype: {data['dtype']}",
        f"    cotangent: {data['cotangent']}",
        f"    seed: {data['seed']}",
        "    inputs:",
        *(f"      {name}: {json.dumps(value)}" for name, value in data["inputs"].items()),
    ]
    assert lines[FIRST_CASE_LINE - 1].startswith("  - name:")
    return "\n".join(lines) + "\n"


def write_case_file(finding: Finding, out: Path, *, seed: int, options: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{case_name(finding.key)}.yaml"
    write_atomic(path, case_file_text(finding, seed=seed, options=options, path=str(path)))
    return path


def reproduce_options(finding: Finding, engine: str | None, reference: str) -> str:
    """SPEC §10: every option `gradcheck run FILE` needs to check the case as the fuzzer
    did: the engine, the ops files declaring the user ops the case uses, the reference."""
    used = {n.op.name for n in finding.example.case.expression.op_nodes if n.op is not None}
    parts = [("--engine", engine)] if engine else []
    parts += [("--ops", path) for path in ops_files_declaring(used)]
    if reference != "tensorflow":
        parts.append(("--reference", reference))
    return " ".join(f"{option} {shlex.quote(value)}" for option, value in parts)


def _field(key: str, text: str) -> list[str]:
    """`key: text` in the case's mapping, as a block scalar when plain YAML would misread it."""
    if "\n" not in text:
        try:
            if yaml.safe_load(f"{key}: {text}") == {key: text}:
                return [f"    {key}: {text}"]
        except yaml.YAMLError:
            pass
    return [f"    {key}: |-", *(f"      {line}" for line in text.splitlines())]


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
