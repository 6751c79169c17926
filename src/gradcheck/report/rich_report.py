"""Human-readable report (SPEC §5): a line per passing case, a diagnosis per failing one.

Everything that comes from a user (case names, expressions, messages, engine
tracebacks, what an engine printed) is wrapped in `Text`, never handed to rich as a
string, so `[red]` in a case name is printed as written instead of being parsed as
markup, and its control characters are shown as escapes (`report.text`). Colour is left
to rich, which drops it for `NO_COLOR` and for output that is not a terminal; there,
no line of the report can start a GitHub Actions workflow command.

A case's status line and a case-file problem's line are `rich_status.py`'s; this module
puts the run together and lays out a failing case's body under its status line.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..engines.naming import config_label, engine_label
from ..results import CaseResult, Hint, RunResult
from .rich_arrays import comparisons
from .rich_status import (
    INDENT,
    STATUS_STYLE,
    STATUS_WORD,
    indented,
    plain,
    problem_lines,
    status_line,
)
from .rich_summary import citation, run_summary, summary_notes
from .text import (
    expr_lines,
    no_workflow_commands,
    printable,
    without_trailing_blanks,
    wrap_lines,
    written_whole,
)

CONFIDENCE_STYLE = {"exact": "bold green", "likely": "yellow", "possible": "dim"}

# The last lines of an engine traceback name the call that failed; `-v` and the JSON
# report keep the whole thing.
TRACEBACK_TAIL_LINES = 12
# Of what an engine printed, a failing case shows the last lines; `-v` and JSON keep it all.
CAPTURED_TAIL_LINES = 20


def render(
    run: RunResult,
    console: Console,
    *,
    verbose: bool = False,
    quiet: bool = False,
    problems: bool = True,
) -> None:
    """Print the whole run: every case (only failures when `quiet`), the run's diagnosis and
    (unless `quiet`) its report card, then the summary.

    `problems=False` leaves the invalid cases out (the command line has shown them on
    stderr). Whole, once rendered: without the blanks rich pads lines with and, off a terminal
    (a CI log), once no line of it can start a workflow command.
    """
    with written_whole(console):
        _render(run, console, verbose, quiet, problems)


def _render(run: RunResult, console: Console, verbose: bool, quiet: bool, problems: bool) -> None:
    if not quiet:
        engine = engine_label(run.engine, run.engine_origin)
        console.print(plain(f"gradcheck: {engine}, reference {run.reference}", style="dim"))
        console.print(plain(f"gradcheck: {config_label(run.config)}", style="dim"))
        if verbose and run.threads:
            console.print(plain(run.threads, style="dim"))
    for case in run.cases:
        if (quiet and case.passed) or (not problems and case.status == "invalid"):
            continue
        if run.fail_fast and case.status == "not run":
            continue  # the summary counts the cases -x left out
        render_case(case, console, verbose, cause=citation(run, case))
    for renderable in run_summary(run, card=not quiet):
        console.print(renderable)
    console.print(Text(summary_line(run), style=_summary_style(run)))


def render_problems(problems: list[tuple[str, str]], console: Console) -> None:
    """Case-file problems, each `(file:line, message)`, as `INVALID` lines: the command
    line prints them on stderr, where problems go whatever the report's format."""
    with written_whole(console):
        for location, message in problems:
            for renderable in problem_lines(location, message, console.width):
                console.print(renderable, soft_wrap=isinstance(renderable, Text))


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
    text = without_trailing_blanks(buffer.getvalue())
    return no_workflow_commands(text.rstrip("\n") + "\n")


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
    """A failing case leads with the answer: its top hint and fix, then the expression,
    the input table and the arrays, then the other explanations."""
    body = width - INDENT
    if case.status == "passed":
        yield from status_line(case, f"{case.file}::{case.name}", _duration(case), width)
        for result in case.inputs:  # passed under a declared convention: say which
            for hint in result.hints:
                yield indented(Text(f"{hint.code}: {hint.message}", style="dim"))
        for part in case.message.split("; "):  # a pass too loose to mean much: say so
            if part.startswith("warning: "):
                yield indented(_user_text(part, "yellow"))
            elif part.startswith("note: "):  # what a traced check says of its trace
                yield indented(_user_text(part, "dim"))
        if verbose:
            yield from map(indented, comparisons(case, True, body))
            yield from _captured(case, verbose, body)
            yield Text()
        return
    if case.status == "skipped":
        detail = _user_text(case.message, "yellow")
        yield from status_line(case, f"{case.file}::{case.name}", detail, width)
        return
    if case.status in ("invalid", "not run"):
        yield from problem_lines(case.location, case.message, width, STATUS_WORD[case.status])
        return
    yield from status_line(case, _full_id(case), _duration(case), width)
    hints = list(_hint_blocks(case, cause))
    yield from hints[:1]  # the answer first
    if case.expr:
        yield indented(_expr(case))
    if case.status == "error":
        yield indented(_user_text(case.message or "engine error", style="red"))
        if case.traceback:
            tail = _tail(case.traceback, TRACEBACK_TAIL_LINES, verbose)
            yield indented(_user_text(wrap_lines(tail, body), "dim"))
    else:
        if case.message:
            yield indented(_user_text(case.message))
        yield from map(indented, comparisons(case, verbose, body))
    if verbose and case.nodes:
        yield _nodes(case)
    yield from hints[1:]
    yield from _captured(case, verbose, body)
    yield Text()


def _full_id(case: CaseResult) -> str:
    return f"{case.location}::{case.name}"


def _user_text(text: str, style: str = "") -> Text:
    """Engine messages, tracebacks and output as inert text.

    They may carry ANSI colour codes (coloured exception messages); decoding them into
    styles lets rich drop them for NO_COLOR and files instead of passing raw escapes on.
    Every other control character is shown as an escape.
    """
    return Text.from_ansi(printable(text, colour=True), style=style)


def _duration(case: CaseResult) -> Text:
    return Text(f"{case.duration_s:.2f}s", style="dim")


def _expr(case: CaseResult) -> Table:
    """`expr` and the expression, its lines (bindings, then the output) as one block."""
    return _labelled([("expr", Text("\n".join(expr_lines(case.expr)), style="cyan"))])


def _labelled(rows: list[tuple[str, RenderableType]], label_style: str = "dim") -> Table:
    """Rows of `label  text`, the text wrapping at words in its own column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style=label_style, no_wrap=True)
    grid.add_column(overflow="fold")
    for label, text in rows:
        grid.add_row(label, text)
    return grid


def _tail(text: str, lines: int, verbose: bool) -> str:
    kept = text.rstrip().splitlines()
    return "\n".join(kept if verbose else kept[-lines:])


def _captured(case: CaseResult, verbose: bool, width: int) -> Iterator[RenderableType]:
    """What the engine printed during the case, under the case it belongs to."""
    if case.captured.strip():
        tail = _tail(case.captured, CAPTURED_TAIL_LINES, verbose)
        yield indented(Text("captured output:", style="dim"))
        yield indented(_user_text(wrap_lines(tail, width - INDENT)), 2)


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
    return indented(lines)


# --- hints ----------------------------------------------------------------------------


def _hint_blocks(case: CaseResult, cause: str | None = None) -> Iterator[RenderableType]:
    """The top hint in full, the case's other hints compactly, then input-only hints.

    Hints arrive ordered strongest first (SPEC §7); the report keeps that order so it
    agrees with the JSON report about which explanation is the best. A hint that says
    the top one's thing again (same code, node and mechanism: its other argument) is
    folded into the top one rather than listed again.
    """
    if not case.hints:
        return
    top, *rest = case.hints
    again = [h for h in rest if _same_finding(h, top)]
    others = [h for h in rest if not _same_finding(h, top)]
    yield indented(_top_hint(top, again, cause))
    if others:
        yield indented(_compact_hints("other explanations", others))
    shown = [*case.hints, *(h for hint in case.hints for h in hint.also)]
    for name, result in case.labelled_inputs():
        extra = [hint for hint in result.hints if not any(hint is h for h in shown)]
        extra = [hint for hint in extra if hint not in shown and not _same_finding(hint, top)]
        if extra:
            yield indented(_compact_hints(f"input {name}", extra))


def _same_finding(hint: Hint, top: Hint) -> bool:
    return (hint.code, hint.node, hint.mechanism) == (top.code, top.node, top.mechanism)


def _top_hint(hint: Hint, again: list[Hint], cause: str | None = None) -> Table:
    """`hint code confidence`, the node, the message, the fix: the answer, in that order."""
    head = Text.assemble(
        (hint.code, "bold red"), "  ", (hint.confidence, CONFIDENCE_STYLE.get(hint.confidence, ""))
    )
    rows: list[tuple[str, RenderableType]] = [("hint", head)]
    if hint.node:
        rows.append(("node", plain(hint.node, style="cyan")))
    rows.append(("", plain(hint.message)))
    if hint.mechanism:
        mechanism = plain(hint.mechanism, style="bold")
        if hint.region:
            mechanism.append(f"  where {printable(hint.region)}", style="")
        rows.append(("mechanism", mechanism))
    if hint.got_rule:  # a recovered formula: the engine's rule beside the right one
        rows.append(("computes", plain(hint.got_rule, style="red")))
        if hint.want_rule:  # a user op declared without rule texts has none to show
            rows.append(("right", plain(hint.want_rule, style="green")))
    rows.append(("fix", plain(hint.fix, style="green")))
    for other in again:
        where = f"arg {other.arg}" if other.arg is not None else "here"
        rows.append(("", plain(f"the same for {where}; fix: {other.fix}", style="green")))
    if hint.also:
        rows.append(("also", plain("seen as " + _also(hint), "dim")))
    if cause:
        rows.append(("run", plain(cause, style="dim")))
    return _labelled(rows, label_style="bold")


def _also(top: Hint) -> str:
    """The folded hints in a few words: each code once, with the places it was seen
    (`op-vjp at matmul(x, y) arg 1, matmul(h, z) args 0 and 1`)."""
    places: dict[str, dict[str, list[str]]] = {}
    for hint in top.also:
        where = hint.node or ""
        if hint.mechanism and hint.mechanism != top.code:
            where = f"{where} [{hint.mechanism}]".strip()
        args = places.setdefault(hint.code, {}).setdefault(where, [])
        if hint.arg is not None:
            args.append(str(hint.arg))
    said = []
    for code, nodes in places.items():
        spots = [_spot(where, args) for where, args in nodes.items()]
        spots = [spot for spot in spots if spot]
        said.append(code + (f" at {', '.join(spots)}" if spots else ""))
    return "; ".join(said)


def _spot(where: str, args: list[str]) -> str:
    if not args:
        return where
    listed = f" {args[0]}" if len(args) == 1 else f"s {', '.join(args[:-1])} and {args[-1]}"
    return f"{where} arg{listed}".strip()


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
