"""A JSON report (`json_report`) read back into the run it reports, for `gradcheck merge`.

What the report holds comes back: each case with its comparisons (their arrays where the
report is verbose), nodes, hints and graph. A hint's folded consequences (`also`) keep
only their code and message, as the report does. The run's root causes and report card
are not read: `merge` recomputes them over every shard's cases.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..results import (
    HINT_FIELDS,
    CaseResult,
    Comparison,
    Consistency,
    GraphNode,
    Hint,
    InputResult,
    NodeResult,
    RunResult,
)


class ReportError(ValueError):
    """Not a gradcheck JSON report, or one that lacks what a case needs."""


def read_run(data: dict[str, Any]) -> RunResult:
    """The run a JSON report (`json_report.to_dict`'s data) describes."""
    try:
        summary = data["summary"]
        return RunResult(
            engine=data["engine"],
            reference=data["reference"],
            cases=[_case(c) for c in data["cases"]],
            duration_s=float(summary["duration_s"]),
            interrupted=summary.get("interrupted"),
            engine_origin=data.get("engine_origin"),
            deselected=int(summary.get("deselected", 0)),
            startup_s=float(summary.get("startup_s", 0.0)),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ReportError(f"not a gradcheck JSON report ({type(e).__name__}: {e})") from None


def _case(data: dict[str, Any]) -> CaseResult:
    def inputs(items: list[dict[str, Any]]) -> list[InputResult]:
        return [_input(item) for item in items]

    return CaseResult(
        name=data["name"],
        file=data["file"],
        line=int(data["line"]),
        status=data["status"],
        expr=data.get("expr", ""),
        message=data.get("message", ""),
        forward=_comparison(data["forward"]) if data.get("forward") else None,
        inputs=inputs(data.get("inputs", [])),
        nodes=[NodeResult(**node) for node in data.get("nodes", [])],
        hints=[_hint(h) for h in data.get("hints", [])],
        graph=[_graph_node(node) for node in data.get("graph", [])],
        duration_s=float(data.get("duration_s", 0.0)),
        traceback=data.get("traceback"),
        tags=list(data.get("tags", [])),
        reference=data.get("reference", "tensorflow"),
        engine_dtype=data.get("engine_dtype"),
        captured=data.get("captured", ""),
        modes=list(data.get("modes", ["rev"])),
        order=int(data.get("order", 1)),
        jvp=inputs(data.get("jvp", {}).get("inputs", [])),
        hvp=inputs(data.get("hvp", {}).get("inputs", [])),
    )


def _hint(data: dict[str, Any]) -> Hint:
    also = [Hint(h["code"], h["message"], "", "possible") for h in data.get("also", [])]
    fields = {key: data[key] for key in HINT_FIELDS if key in data}
    return Hint(data["code"], data["message"], data["fix"], data["confidence"], **fields,
                also=also)  # fmt: skip


def _input(data: dict[str, Any]) -> InputResult:
    consistency = data.get("consistency")
    return InputResult(
        name=data["name"],
        comparison=_comparison(data),
        hints=[_hint(h) for h in data.get("hints", [])],
        consistency=Consistency(**consistency) if consistency else None,
    )


def _comparison(data: dict[str, Any]) -> Comparison:
    worst = data.get("worst_index")
    same = list(data["reference_shape"]) == list(data["engine_shape"])
    return Comparison(
        status=data["status"],
        reference_shape=tuple(data["reference_shape"]),
        engine_shape=tuple(data["engine_shape"]),
        max_abs_diff=_number(data.get("max_abs_diff"), same),
        max_rel_diff=_number(data.get("max_rel_diff"), same),
        mismatched=int(data["mismatched"]),
        size=int(data["size"]),
        worst_index=tuple(worst) if worst is not None else None,
        reference=_array(data.get("reference")),
        engine=_array(data.get("engine")),
    )


def _graph_node(data: dict[str, Any]) -> GraphNode:
    return GraphNode(**{**data, "shape": tuple(data["shape"]), "args": list(data["args"])})


def _number(value: Any, same_shape: bool) -> float | None:
    """A difference: null is None where the shapes differ, else a non-finite one (NaN)."""
    if value is None:
        return float("nan") if same_shape else None
    return float(value)


def _array(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=float)
