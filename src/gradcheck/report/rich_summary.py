"""The end of the rich report (SPEC §6.2): the run's diagnosis, then the engine's report card.

The root causes come first, each said once with the cases it explains and the case that
decided it over a rival; then, per op, how the cases using it fared, in a table that fits
80 columns (the mechanisms found wrap in their column, or under their op beside a long
op name). `citation` is the line a case's own
report (and its JUnit or GitHub text) gives to the run's cause it shares.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..results import CaseResult, OpRecord, RootCause, RunResult
from .rich_status import indented

SHOWN_CASES = 6  # case ids listed under a cause; the JSON report has them all
STARTUP_SHOWN_S = 0.05  # a start-up shorter than this is not worth a mention
CARD_LEGEND = (
    "fail: found wrong there; other: failed, but found wrong elsewhere; "
    "lacks: skipped, the engine lacks the op"
)
CONFIDENCE_STYLE = {"exact": "bold green", "likely": "yellow", "possible": "dim"}


def citation(run: RunResult, case: CaseResult) -> str | None:
    """`root cause 1 of the run, shared by 11 failing cases`, for a cause shared by several."""
    found = run.root_cause_of(case)
    if found is None or len(found[1].cases) < 2:
        return None
    number, cause = found
    return (
        f"root cause {number} of the run ({cause.hint.code}), shared by {len(cause.cases)} "
        "failing cases"
    )


def summary_notes(run: RunResult) -> Iterator[str]:
    """What the summary line adds after its totals (SPEC §5): the one-off start-up left out
    of them, why cases did not run, that nothing was checked."""
    if run.startup_s >= STARTUP_SHOWN_S:
        yield f" (+{run.startup_s:.1f}s TensorFlow start-up)"
    if run.fail_fast:
        yield ": -x stopped the run at the first failure"
    if run.nothing_checked:
        yield "; nothing was checked"


def run_summary(run: RunResult, *, card: bool = True) -> Iterator[RenderableType]:
    """The run's diagnosis when a case failed, then (if `card`) the report card."""
    failing = [c for c in run.cases if c.status in ("failed", "error")]
    if failing and run.root_causes:
        yield from _causes(run, failing)
    if card and run.ops:
        yield Text("report card: the cases using each op", style="bold")
        yield indented(_Card(run.ops))
        yield indented(Text(CARD_LEGEND, style="dim"))  # as wide as the line, not the table


def _causes(run: RunResult, failing: list[CaseResult]) -> Iterator[RenderableType]:
    count = len(run.root_causes)
    yield Text(
        f"run diagnosis: {len(failing)} failing case{'s' if len(failing) > 1 else ''}, "
        f"{count} root cause{'s' if count > 1 else ''}",
        style="bold",
    )
    for number, cause in enumerate(run.root_causes, 1):
        yield indented(_cause(number, cause))
    explained = {i for cause in run.root_causes for i in cause.cases}
    left = [c.id for c in failing if c.id not in explained]
    if left:
        yield indented(Text(f"not explained: {_ids(left)}", style="dim"))
    yield Text()


def _cause(number: int, cause: RootCause) -> Table:
    hint = cause.hint
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    n = len(cause.cases)
    grid.add_row(
        f"{number}.",
        Text.assemble(
            (hint.code, "bold red"),
            f" [{hint.mechanism}]" if hint.mechanism else "",
            "  ",
            (hint.confidence, CONFIDENCE_STYLE.get(hint.confidence, "")),
            f"  {n} case{'s' if n > 1 else ''}",
        ),
    )
    grid.add_row("", Text(hint.message))
    grid.add_row("", Text.assemble(("fix: ", "dim"), (hint.fix, "green")))
    grid.add_row("", Text.assemble(("cases: ", "dim"), _ids(cause.cases)))
    for rival in cause.rivals:
        said = (
            f"decided by {rival.ruled_out_by}, which {rival.label} does not explain"
            if rival.ruled_out_by
            else f"or {rival.label}: no case of the run tells the two apart"
        )
        grid.add_row("", Text(said, style="dim"))
    return grid


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOWN_CASES])
    return shown + (f" and {len(ids) - SHOWN_CASES} more" if len(ids) > SHOWN_CASES else "")


class _Card:
    """The report card, as wide as it may be: the mechanisms found in a column of their
    own, or where a whole one would not fit beside a long op name, on the line under it."""

    def __init__(self, ops: dict[str, OpRecord]) -> None:
        self.ops = ops

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        beside = _card(self.ops, beside=True)
        narrowest = console.measure(beside, options=options.update_width(10**6)).minimum
        yield beside if narrowest <= options.max_width else _card(self.ops, beside=False)


def _card(ops: dict[str, OpRecord], *, beside: bool) -> Table:
    # One space between columns, not two: beside a long op name (take_along_axis,
    # sparse_softmax_cross_entropy) the found column keeps room for a whole mechanism.
    table = Table(
        box=None,
        pad_edge=False,
        collapse_padding=True,
        header_style="dim",
        show_edge=False,
    )
    # Under the op, what was found wraps at words in the op's column.
    table.add_column("op", no_wrap=beside, overflow="fold")
    for heading in ("pass", "fail", "other", "lacks"):
        table.add_column(heading, justify="right", no_wrap=True, min_width=len(heading))
    if beside:
        table.add_column("found", overflow="fold")  # wraps at words, under itself
    for op, record in sorted(ops.items(), key=lambda item: _order(item[1])):
        found = _found(record)
        table.add_row(
            op if beside or not found else Group(op, Padding(_said(found), (0, 0, 0, 2))),
            str(record.passed),
            Text(str(record.failed), style="bold red" if record.failed else ""),
            str(record.failed_elsewhere),
            Text(str(record.unsupported), style="yellow" if record.unsupported else ""),
            *([found] if beside else []),
        )
    return table


def _said(found: str) -> Text:
    return Text.assemble(("found: ", "dim"), found)


def _found(record: OpRecord) -> str:
    """What was found wrong with the op: a mechanism (with how many cases, when several)."""
    if list(record.mechanisms.values()) == [record.failed]:
        return next(iter(record.mechanisms))
    return ", ".join(f"{m} x{n}" for m, n in record.mechanisms.items())


def _order(record: OpRecord) -> tuple[int, int]:
    """Ops found wrong first, then those the engine lacks, then the rest as they came."""
    return (0 if record.failed else 1 if record.unsupported else 2), -record.failed
