"""A fuzz run for people (rich) and for tools (JSON).

Each bug is shown as `gradcheck run` shows a failing case (its diagnosis, top hint
first), followed by its case file, or where it was written. Then the coverage, op by op,
and a summary line: bugs found, examples tried, how the run ended.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..engines.naming import config_label, engine_label
from ..report import render_case, to_dict
from ..report.text import written_whole
from ..results import RunResult
from . import FuzzRun, Progress
from .coverage import ordered
from .output import plural
from .search import describe

STOPPED = {
    "max-examples": "the example budget was spent",
    "time": "the time was up",
    "max-bugs": "enough bugs were found",
    "exhausted": "nothing new was left to generate",
    "interrupted": "interrupted",
}


def render_fuzz(run: FuzzRun, console: Console, *, quiet: bool = False) -> None:
    with written_whole(console):
        _render_fuzz(run, console, quiet)


def _render_fuzz(run: FuzzRun, console: Console, quiet: bool) -> None:
    if not quiet:
        ops = ", ".join(run.ops)
        console.print(
            Text(
                f"gradcheck fuzz: {engine_label(run.engine, run.engine_origin)}, "
                f"reference {run.reference}, "
                f"seed {run.seed}, {config_label(run.config)}, ops {ops}",
                style="dim",
            )
        )
    for bug in run.bugs:
        render_case(bug.result, console)
        finding = bug.finding
        if bug.path:
            console.print(Text.assemble(("case file ", "dim"), (str(bug.path), "bold")))
        else:  # a YAML file to copy: rich must not fold its lines
            why = f"{bug.unwritten}" if bug.unwritten else "--out DIR writes it"
            console.print(
                Text(f"case file (not written: {why}):", "red" if bug.unwritten else "dim")
            )
            console.print(Text(bug.text.rstrip("\n")), soft_wrap=True)
        console.print(
            Text(
                f"found after {plural(finding.after_examples, 'example')} "
                f"({finding.after_s:.1f}s), shrunk in {plural(finding.shrink_steps, 'step')} "
                f"({finding.shrink_s:.1f}s)",
                style="dim",
            )
        )
        if not bug.reproduced:
            console.print(
                Text("the written case does not fail the same way again: a flaky engine?", "red")
            )
        console.print()
    if not quiet:
        console.print(coverage_table(run))
    if run.not_implemented:
        left_out = ", ".join(run.not_implemented)
        console.print(Text(f"not implemented (NotImplementedError), left out: {left_out}"))
    console.print(Text(summary_line(run), style="bold red" if run.bugs else "bold green"))


def coverage_table(run: FuzzRun) -> Table:
    coverage = run.search.coverage
    dtypes = ", ".join(f"{n} {d}" for d, n in sorted(coverage.dtypes.items()))
    table = Table(
        title=f"coverage: {coverage.examples} examples ({dtypes or 'none'})",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("op")
    table.add_column("examples", justify="right")
    table.add_column("exercised (op nodes)", overflow="fold")
    for name in run.ops:
        entry = coverage.ops.get(name)
        if entry is None:
            table.add_row(name, "0", Text("never generated", style="yellow"))
            continue
        features = ", ".join(f"{f} {n}" for f, n in ordered(entry.features).items())
        table.add_row(name, str(entry.examples), features)
    return table


def summary_line(run: FuzzRun) -> str:
    result = run.search
    found = f"{plural(len(run.bugs), 'bug')} found" if run.bugs else "no bug found"
    tried = plural(result.examples, "example")
    if result.shrink_steps:
        tried += f" (+{result.shrink_steps} while shrinking)"
    notes = [
        f"{n} {what}"
        for n, what in (
            (result.rejected, "outside an op's domain, not checked"),
            (result.skipped, "unsupported"),
            (result.unconfirmed, "differed from the builtin engine only"),
            (result.rounding, "off by rounding only"),
            (result.reference_failed, "the reference could not compute (the generator's)"),
        )
        if n
    ]
    extra = f"; {', '.join(notes)}" if notes else ""
    return (
        f"{found} in {tried} in {result.duration_s:.2f}s; stopped: {STOPPED[result.stopped]}"
        + extra
    )


def progress_line(progress: Progress) -> str:
    """What the search is doing, on one line: examples tried, bugs found, time left."""
    if progress.shrinking:
        return f"shrinking {describe(progress.shrinking)}: {plural(progress.shrink_steps, 'step')}"
    left = progress.seconds_left
    tried = f"{plural(progress.examples, 'example')}, {plural(progress.bugs, 'bug')}"
    timing = f"{progress.elapsed_s:.0f}s" + (f", {left:.0f}s left" if left is not None else "")
    return f"fuzzing: {tried}, {timing}"


def fuzz_to_dict(run: FuzzRun, *, tool_version: str) -> dict[str, Any]:
    """The run as JSON-ready data; each bug's case as in `gradcheck run`'s JSON report."""
    cases = RunResult(run.engine, run.reference, [b.result for b in run.bugs], 0.0)
    checked = to_dict(cases, tool_version=tool_version)["cases"]
    result = run.search
    return {
        "tool": "gradcheck",
        "version": tool_version,
        "command": "fuzz",
        "engine": run.engine,
        "engine_origin": run.engine_origin,  # as `gradcheck run`'s report has it
        "config": run.config,
        "reference": run.reference,
        "seed": run.seed,
        "ops": list(run.ops),
        "not_implemented": list(run.not_implemented),
        "summary": {
            "bugs": len(run.bugs),
            "examples": result.examples,
            "shrink_steps": result.shrink_steps,
            "rejected": result.rejected,
            "skipped": result.skipped,
            "unconfirmed": result.unconfirmed,
            "rounding": result.rounding,
            "reference_failed": result.reference_failed,
            "stopped": result.stopped,
            "duration_s": round(result.duration_s, 3),
        },
        "bugs": [
            {
                "hint": bug.key[0],
                "op": bug.key[1],
                "file": str(bug.path) if bug.path else None,
                "unwritten": bug.unwritten,  # why --out could not take it
                "reproduced": bug.reproduced,
                "after_examples": bug.finding.after_examples,
                "after_s": round(bug.finding.after_s, 3),
                "shrink_steps": bug.finding.shrink_steps,
                "shrink_s": round(bug.finding.shrink_s, 3),
                "case_file": bug.text,
                "case": case,
            }
            for bug, case in zip(run.bugs, checked, strict=True)
        ],
        "coverage": result.coverage.to_dict(),
    }
