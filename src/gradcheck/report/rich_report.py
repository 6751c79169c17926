"""Human-readable report (SPEC §5): a line per passing case, a diagnosis per failing one.

Everything that comes from a user (case names, expressions, messages, engine
tracebacks, what an engine printed) is wrapped in `Text`, never handed to rich as a
string, so `[red]` in a case name is printed as written instead of being parsed as
markup, and its control characters are shown as escapes (`report.text`). Colour is left
to rich, which drops it for `NO_COLOR` and for output that is not a terminal; there,
no line of the report can start a GitHub Actions workflow command.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np
from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gradcheck.report.rich_summary import citation, run_summary, summary_notes
from gradcheck.report.text import no_workflow_commands, printable
from gradcheck.results import CaseResult, Comparison, Hint, RunResult

STATUS_WORD = {
    "passed": "PASSED",
    "failed": "FAILED",
    "error": "ERROR",
    "skipped": "SKIPPED",
    "invalid": "INVALID",
    "not run": "NOT RUN",
}
STATUS_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "error": "bold red",
    "skipped": "yellow",
    "invalid": "bold magenta",
    "not run": "dim",
}
CONFIDENCE_STYLE = {"exact": "bold green", "likely": "yellow", "possible": "dim"}

# Arrays up to this many elements are printed in verbose mode; larger ones would
# scroll the diagnosis off the screen.
ARRAY_PRINT_LIMIT = 64
# A failing input's arrays are shown without -v when they are this small: seeing the
# wrong numbers next to the right ones is often the whole story.
FAILING_ARRAY_LIMIT = 27
# The last lines of an engine traceback name the call that failed; `-v` and the JSON
# report keep the whole thing.
TRACEBACK_TAIL_LINES = 12
# Of what an engine printed, a failing case shows the last lines; `-v` and JSON keep it all.
CAPTURED_TAIL_LINES = 20
INDENT = 2


def render(run: RunResult, console: Console, *, verbose: bool = False, quiet: bool = False) -> None:
    """Print the whole run: every case (only failures when `quiet`), the run's diagnosis and
    (unless `quiet`) its report card, then the summary.

    On a terminal as it goes; elsewhere (a CI log) whole, once no line of it can start a
    workflow command.
    """
    if console.is_terminal:
        _render(run, console, verbose, quiet)
        return
    with console.capture() as captured:
        _render(run, console, verbose, quiet)
    console.file.write(no_workflow_commands(captured.get()))


def _render(run: RunResult, console: Console, verbose: bool, quiet: bool) -> None:
    if not quiet:
        origin = f" {run.engine_origin}" if run.engine_origin else ""
        header = f"gradcheck: engine {run.engine}{origin}, reference {run.reference}"
        console.print(_plain(header, style="dim"))
    for case in run.cases:
        if (quiet and case.passed) or (run.fail_fast and case.status == "not run"):
            continue  # the summary counts the cases -x left out
        render_case(case, console, verbose, cause=citation(run, case))
    for renderable in run_summary(run, card=not quiet):
        console.print(renderable)
    console.print(Text(summary_line(run), style=_summary_style(run)))


def render_case(
    case: CaseResult, console: Console, verbose: bool = False, cause: str | None = None
) -> None:
    """Print one case: a single line when it passed or was skipped, else its diagnosis
    (`cause`: the run's root cause it shares, as `rich_summary.citation` says it)."""
    for renderable in _case_renderables(case, verbose, console.width, cause):
        # A bare Text is a status line (`FAILED  file:line::name`), made to be copied and
        # grepped: never break it mid-name; the terminal wraps it, as pytest's lines.
        console.print(renderable, soft_wrap=isinstance(renderable, Text))


def plain_text(case: CaseResult, *, width: int = 80, cause: str | None = None) -> str:
    """The same report for one case without colour or markup (JUnit, pytest plugin)."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system=None,
        force_terminal=False,
        no_color=True,
        emoji=False,
        highlight=False,
    )
    render_case(case, console, verbose=False, cause=cause)
    # rich pads every line of a multi-line block to the block's width; plain text
    # (a CI log, an XML attribute's neighbour) is easier to read and diff without it.
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    return no_workflow_commands("\n".join(lines).rstrip("\n") + "\n")


def summary_line(run: RunResult) -> str:
    """pytest-style totals: `1 failed, 12 passed, 2 skipped in 0.84s` (zero counts left out),
    then `rich_summary.summary_notes`; for a run without cases, why it had none."""
    parts = []
    for status in ("failed", "error", "invalid", "passed", "skipped", "not run"):
        count = run.count(status)
        if count:
            noun = "errors" if status == "error" and count > 1 else status
            parts.append(f"{count} {noun}")
    if run.deselected:
        parts.append(f"{run.deselected} deselected")
    if not run.cases:
        return f"no cases ran: {run.nothing_found}" if run.nothing_found else "no cases ran"
    stopped = f"interrupted by {run.interrupted}: " if run.interrupted else ""
    return f"{stopped}{', '.join(parts)} in {run.duration_s:.2f}s" + "".join(summary_notes(run))


def _summary_style(run: RunResult) -> str:
    bad = run.interrupted or any(run.count(s) for s in ("failed", "error", "invalid"))
    if bad:
        return "bold red"
    return "bold yellow" if run.exit_code or run.nothing_checked else "bold green"


def headline(case: CaseResult) -> str:
    """One line saying why a case did not pass: its top hint, else its message."""
    if case.hints:
        top = case.hints[0]
        return printable(f"{top.code}: {top.message}")
    return printable(case.message or case.status)


# --- one case -------------------------------------------------------------------------


def _case_renderables(
    case: CaseResult, verbose: bool, width: int, cause: str | None = None
) -> Iterator[RenderableType]:
    if case.status == "passed":
        yield _status_line(case, case_id=f"{case.file}::{case.name}", detail=_duration(case))
        for result in case.inputs:  # passed under a declared convention: say which
            for hint in result.hints:
                yield _indented(Text(f"{hint.code}: {hint.message}", style="dim"))
        if verbose:
            yield from _comparisons(case, verbose, width)
            yield from _captured(case, verbose)
            yield Text()
    elif case.status == "skipped":
        yield _status_line(
            case, case_id=f"{case.file}::{case.name}", detail=_user_text(case.message, "yellow")
        )
    elif case.status in ("invalid", "not run"):
        yield _status_line(case, case_id=_invalid_location(case), detail=Text())
    elif case.status == "error":
        yield _status_line(case, case_id=_full_id(case), detail=_duration(case))
        yield from _error_body(case, verbose, cause)
    else:
        yield _status_line(case, case_id=_full_id(case), detail=_duration(case))
        yield from _failure_body(case, verbose, width, cause)


def _status_line(case: CaseResult, *, case_id: str, detail: Text) -> Text:
    # Pad to the longest word (SKIPPED/INVALID) so the case ids line up.
    line = Text.assemble(
        (f"{STATUS_WORD[case.status]:<7}", STATUS_STYLE[case.status]), " ", printable(case_id)
    )
    if detail:
        line.append("  ")
        line.append_text(detail)
    return line


def _full_id(case: CaseResult) -> str:
    return f"{case.location}::{case.name}"


def _invalid_location(case: CaseResult) -> str:
    # Case-file errors usually already start with `file:line:` (SPEC §3); don't repeat it.
    if case.message.startswith(case.location):
        return case.message
    return f"{case.location}: {case.message}"


def _user_text(text: str, style: str = "") -> Text:
    """Engine messages, tracebacks and output as inert text.

    They may carry ANSI colour codes (coloured exception messages); decoding them into
    styles lets rich drop them for NO_COLOR and files instead of passing raw escapes on.
    Every other control character is shown as an escape.
    """
    return Text.from_ansi(printable(text, colour=True), style=style)


def _plain(text: str, style: str = "") -> Text:
    """Text from a case file (an expression, a node, a hint quoting one), escaped."""
    return Text(printable(text), style=style)


def _duration(case: CaseResult) -> Text:
    return Text(f"{case.duration_s:.2f}s", style="dim")


def _indented(renderable: RenderableType, level: int = 1) -> Padding:
    # expand=False: padding to the full width would leave trailing spaces on every line.
    return Padding(renderable, (0, 0, 0, INDENT * level), expand=False)


def _failure_body(
    case: CaseResult, verbose: bool, width: int, cause: str | None
) -> Iterator[RenderableType]:
    if case.expr:
        yield _indented(_expr(case))
    if case.message:
        yield _indented(_user_text(case.message))
    yield from _comparisons(case, verbose, width)
    if verbose and case.nodes:
        yield _nodes(case)
    yield from _hint_blocks(case, cause)
    yield from _captured(case, verbose)
    yield Text()


def _error_body(case: CaseResult, verbose: bool, cause: str | None) -> Iterator[RenderableType]:
    if case.expr:
        yield _indented(_expr(case))
    yield _indented(_user_text(case.message or "engine error", style="red"))
    if case.traceback:
        yield _indented(_user_text(_tail(case.traceback, TRACEBACK_TAIL_LINES, verbose), "dim"))
    if verbose and case.nodes:
        yield _nodes(case)
    yield from _hint_blocks(case, cause)  # where the error is, when the diagnosis found it
    yield from _captured(case, verbose)
    yield Text()


def _expr(case: CaseResult) -> Text:
    return Text.assemble(("expr ", "dim"), (printable(case.expr), "cyan"))


def _tail(text: str, lines: int, verbose: bool) -> str:
    kept = text.rstrip().splitlines()
    return "\n".join(kept if verbose else kept[-lines:])


def _captured(case: CaseResult, verbose: bool) -> Iterator[RenderableType]:
    """What the engine printed during the case, under the case it belongs to."""
    if case.captured.strip():
        yield _indented(Text("captured output:", style="dim"))
        yield _indented(_user_text(_tail(case.captured, CAPTURED_TAIL_LINES, verbose)), 2)


# --- comparisons ----------------------------------------------------------------------


def _comparisons(case: CaseResult, verbose: bool, width: int) -> Iterator[RenderableType]:
    """The input table (forward row first when it failed), then arrays to read."""
    rows: list[tuple[str, Comparison]] = []
    # A wrong forward value makes every gradient suspect, so it leads the table.
    if case.forward is not None and (verbose or not case.forward.passed):
        rows.append(("(forward)", case.forward))
    rows += [
        (name, i.comparison)
        for name, i in case.labelled_inputs()
        if verbose or not i.comparison.passed
    ]
    inconsistent = [
        (i.name, i.consistency)
        for i in case.jvp
        if i.consistency is not None and (verbose or not i.consistency.passed)
    ]
    if not rows and not inconsistent:
        return
    if rows:
        yield _indented(_comparison_table(rows))
    for name, c in inconsistent:
        line = Text(f"{name}: forward vs reverse mode: <vjp(u), t> = {c.vjp_dot:.6g}, ")
        line.append(f"<u, jvp(t)> = {c.jvp_dot:.6g} (bound {c.bound:.2g}) ")
        line.append(c.status, style=STATUS_STYLE[c.status])
        yield _indented(line)
    for name, comparison in rows:
        if verbose or (not comparison.passed and comparison.size <= FAILING_ARRAY_LIMIT):
            yield _indented(_arrays(name, comparison, width - INDENT))


def _comparison_table(rows: list[tuple[str, Comparison]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("input", overflow="fold")
    table.add_column("ref shape", overflow="fold")
    table.add_column("engine shape", overflow="fold")
    table.add_column("max abs", justify="right", no_wrap=True)
    table.add_column("max rel", justify="right", no_wrap=True)
    table.add_column("mismatched", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for name, c in rows:
        shape_style = "" if c.reference_shape == c.engine_shape else "bold red"
        table.add_row(
            _plain(name, style="bold"),
            Text(_shape(c.reference_shape)),
            Text(_shape(c.engine_shape), style=shape_style),
            Text(_number(c.max_abs_diff)),
            Text(_number(c.max_rel_diff)),
            Text(f"{c.mismatched}/{c.size}"),
            Text(c.status, style=STATUS_STYLE[c.status]),
        )
    return table


def _shape(shape: tuple[int, ...]) -> str:
    return "scalar" if len(shape) == 0 else str(tuple(shape))


def _number(value: float | None) -> str:
    # None: no meaningful value (e.g. shapes differ); NaN/inf print as numpy does.
    return "-" if value is None else f"{value:.3g}"


def _arrays(name: str, comparison: Comparison, width: int) -> RenderableType:
    """Reference, engine and difference side by side, for arrays small enough to read."""
    reference, engine = comparison.reference, comparison.engine
    title = Text.assemble((printable(name), "bold"), " arrays")
    if comparison.worst_index is not None:
        title.append(f", worst at index {tuple(comparison.worst_index)}", style="dim")
    if reference is None or engine is None:
        return title.append(": not recorded", style="dim")
    reference, engine = np.asarray(reference), np.asarray(engine)
    if max(reference.size, engine.size) > ARRAY_PRINT_LIMIT:
        return title.append(f": too large to print (> {ARRAY_PRINT_LIMIT} elements)", "dim")

    blocks = {"reference": reference, "engine": engine}
    if reference.shape == engine.shape:
        # inf - inf is NaN, which is exactly what the difference should show there.
        with np.errstate(invalid="ignore", over="ignore"):
            blocks["engine - reference"] = np.subtract(
                np.asarray(engine, np.float64), np.asarray(reference, np.float64)
            )
    column_width = max(12, (width - 2 * (len(blocks) - 1)) // len(blocks))
    grid = Table(
        box=None,
        show_edge=False,
        pad_edge=False,
        padding=(0, 2),
        title=title,
        title_justify="left",
        header_style="dim",
    )
    for heading in blocks:
        grid.add_column(heading, overflow="fold")
    texts = [
        _array_text(a, column_width, small=heading != "engine - reference")
        for heading, a in blocks.items()
    ]
    grid.add_row(*map(Text, texts))
    return grid


def _array_text(array: np.ndarray, width: int, *, small: bool = True) -> str:
    """`small=False` for differences: a difference of 1e-7 must not print as `0.`."""
    array = np.asarray(array, np.float64)  # bfloat16 prints as NumPy floats do
    return np.array2string(array, precision=4, max_line_width=width, suppress_small=small)


def _nodes(case: CaseResult) -> RenderableType:
    lines = Text()
    lines.append("nodes checked alone:", style="dim")
    for node in case.nodes:
        lines.append("\n  ")
        lines.append(f"{node.status:<7}", style=STATUS_STYLE.get(node.status, ""))
        lines.append(f" {printable(node.node)}")
        if node.check != "vjp":
            lines.append(f"  [{node.check}]", style="dim")
        if node.args:
            lines.append(f"  (args {', '.join(map(str, node.args))})", style="dim")
    return _indented(lines)


# --- hints ----------------------------------------------------------------------------


def _hint_blocks(case: CaseResult, cause: str | None = None) -> Iterator[RenderableType]:
    """The top hint in full, the case's other hints compactly, then input-only hints.

    Hints arrive ordered strongest first (SPEC §7); the report keeps that order so it
    agrees with the JSON report about which explanation is the best.
    """
    if case.hints:
        top, *others = case.hints
        yield _indented(_top_hint(top, cause))
        if others:
            yield _indented(_compact_hints("other explanations", others))
    shown = [*case.hints, *(h for top in case.hints for h in top.also)]
    for name, result in case.labelled_inputs():
        extra = [hint for hint in result.hints if not any(hint is h for h in shown)]
        extra = [hint for hint in extra if hint not in shown]
        if extra:
            yield _indented(_compact_hints(f"input {name}", extra))


def _top_hint(hint: Hint, cause: str | None = None) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(
        "hint",
        Text.assemble(
            (hint.code, "bold red"),
            "  ",
            (hint.confidence, CONFIDENCE_STYLE.get(hint.confidence, "")),
        ),
    )
    grid.add_row("", _plain(hint.message))
    if hint.mechanism:
        mechanism = _plain(hint.mechanism, style="bold")
        if hint.region:
            mechanism.append(f"  where {printable(hint.region)}", style="")
        grid.add_row("mechanism", mechanism)
    grid.add_row("fix", _plain(hint.fix, style="green"))
    if hint.node:
        grid.add_row("node", _plain(hint.node, style="cyan"))
    if hint.also:
        grid.add_row("also", _plain("seen as " + "; ".join(_also(h) for h in hint.also), "dim"))
    if cause:
        grid.add_row("run", _plain(cause, style="dim"))
    return grid


def _also(hint: Hint) -> str:
    """A folded hint in a few words: its code and where it applies."""
    where = [hint.node] if hint.node else []
    if hint.arg is not None:
        where.append(f"arg {hint.arg}")
    if hint.mechanism:
        where.append(hint.mechanism)
    return hint.code + (f" ({', '.join(where)})" if where else "")


def _compact_hints(heading: str, hints: list[Hint]) -> RenderableType:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for hint in hints:
        text = Text.assemble(
            (hint.code, "bold"),
            f" [{hint.mechanism}]" if hint.mechanism else "",
            " (",
            (hint.confidence, CONFIDENCE_STYLE.get(hint.confidence, "")),
            ") ",
            printable(hint.message),
        )
        text.append("\nfix: ", style="dim")
        text.append(printable(hint.fix))
        grid.add_row("-", text)
    return Group(Text(heading + ":", style="dim"), grid)
