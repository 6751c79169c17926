"""Machine-readable report (SPEC §7): one JSON document per run.

Every number that is not finite (a NaN or infinite difference) becomes `null`, so the
output is strict JSON that any parser accepts; a `null` difference always means "no
finite value", which readers must already handle because `max_rel_diff` is `null`
when the shapes differ. Strings keep what they hold, control characters escaped as
JSON escapes (``\u001b``), C1 ones and DEL included, so a JSON report printed to a
terminal cannot act on it. `captured` is what the engine printed during the case.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

import numpy as np

from ..results import CaseResult, Comparison, InputResult, NodeResult, RunResult


def to_dict(run: RunResult, *, tool_version: str, verbose: bool = False) -> dict[str, Any]:
    """The run as plain JSON-ready data; `verbose` adds each comparison's arrays."""
    report = {
        "tool": "gradcheck",
        "version": tool_version,
        "engine": run.engine,
        "engine_origin": run.engine_origin,  # not in SPEC §7: an addition, beside the engine
        "config": run.config,  # an addition too: the config file read, None for none
        "reference": run.reference,
        "summary": run.summary,
        "cases": [_case(case, verbose) for case in run.cases],
    }
    return _jsonable(report)


def to_json(
    run: RunResult, *, tool_version: str, verbose: bool = False, indent: int | None = 2
) -> str:
    """The run as a strict JSON string (no NaN/Infinity literals)."""
    data = to_dict(run, tool_version=tool_version, verbose=verbose)
    text = json.dumps(data, indent=indent, allow_nan=False, ensure_ascii=False)
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)  # json escapes C0 itself


_C1 = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _case(case: CaseResult, verbose: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": case.name,
        "file": case.file,
        "line": case.line,
        "status": case.status,
        "expr": case.expr,
        "message": case.message,
        "tags": list(case.tags),
        "reference": case.reference,
        "engine_dtype": case.engine_dtype,
        "forward": _comparison(case.forward, verbose) if case.forward else None,
        "inputs": [_input(result, verbose) for result in case.inputs],
        "modes": list(case.modes),
        "order": case.order,
        "nodes": [_node(node) for node in case.nodes],
        # Not in SPEC §7: the expression's graph, so `gradcheck merge` recomputes the
        # report card (the ops each case uses) and the merged HTML report draws it.
        "graph": [dataclasses.asdict(node) for node in case.graph],
        "hints": [hint.to_dict() for hint in case.hints],
        "captured": case.captured,
        "duration_s": round(case.duration_s, 3),
    }
    if case.jvp:
        out["jvp"] = {"inputs": [_input(result, verbose) for result in case.jvp]}
    if case.hvp:
        out["hvp"] = {"inputs": [_input(result, verbose) for result in case.hvp]}
    if case.status == "error":
        out["traceback"] = case.traceback
    return out


def _input(result: InputResult, verbose: bool) -> dict[str, Any]:
    out = {
        "name": result.name,
        **_comparison(result.comparison, verbose),
        "hints": [hint.to_dict() for hint in result.hints],
    }
    if result.consistency is not None:
        c = result.consistency
        out["consistency"] = {
            "status": c.status,
            "vjp_dot": c.vjp_dot,
            "jvp_dot": c.jvp_dot,
            "bound": c.bound,
        }
    return out


def _comparison(comparison: Comparison, verbose: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": comparison.status,
        "reference_shape": list(comparison.reference_shape),
        "engine_shape": list(comparison.engine_shape),
        "max_abs_diff": comparison.max_abs_diff,
        "max_rel_diff": comparison.max_rel_diff,
        "mismatched": comparison.mismatched,
        "size": comparison.size,
        "worst_index": comparison.worst_index,
    }
    if verbose:
        out["reference"] = comparison.reference
        out["engine"] = comparison.engine
    return out


def _node(node: NodeResult) -> dict[str, Any]:
    return {
        "node": node.node,
        "op": node.op,
        "status": node.status,
        "args": list(node.args),
        "check": node.check,
    }


def _jsonable(value: Any) -> Any:
    """Recursively turn NumPy values and tuples into JSON types; non-finite floats into None."""
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    # bool before int: np.bool_ is not an int subclass, and True must stay `true`.
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    return value
