"""`run`'s reports: the cases run with a progress bar, then the terminal's report and
the one `--output` names, in the format `--format` (or the file's suffix) says."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

from .. import __version__
from .common import EXIT_USAGE, echo_err, stdout_console


class Format(str, enum.Enum):
    rich = "rich"
    json = "json"
    junit = "junit"
    github = "github"  # the rich report, then GitHub Actions annotations
    html = "html"  # a page to look at (SPEC §11)


FILE_FORMATS = (Format.json, Format.junit, Format.html)
SUFFIX_FORMATS = {".html": Format.html, ".htm": Format.html, ".json": Format.json,
                  ".xml": Format.junit}  # fmt: skip


class Report:
    """Run the cases with a progress bar, then write the reports: the terminal's, and the
    one `--output` names. A report that cannot be written exits 2, after the terminal's."""

    def __init__(self, format: Format | None, output: Path | None, **settings) -> None:
        self.format = format
        self.output = output
        self.into_file = _file_format(format, output) if output is not None else None
        self.verbose = settings["verbose"]
        self.quiet = settings["quiet"]
        self.durations = settings["durations"]
        self.repro: tuple[Path, str] | None = settings["repro"]  # the folder, the --engine spec
        self.console = stdout_console()
        self.rich_to_stdout = format not in FILE_FORMATS or output is not None

    def run(self, collected, engine, options) -> None:
        from ..results import SIGNAL_EXIT
        from ..runner import run as run_cases
        from ..util.interrupts import quiet, received
        from .progress import progress

        total = len(collected.items)
        with progress(self.console, total, show=self.rich_to_stdout) as on_result:
            result = run_cases(collected, engine, options, on_result=on_result)
        with quiet():  # a second ^C must not cut the report short
            problem = self.write(result)
            if self.repro is not None:
                problem = _write_repro(*self.repro, collected.items, result) or problem
        if problem:
            echo_err(f"gradcheck: error: {problem}")
        elif not result.cases and not self.rich_to_stdout:  # the rich summary says why
            echo_err(f"gradcheck: no cases ran: {result.nothing_found}")
        stopped = result.interrupted or received()  # a signal while writing counts too
        code = SIGNAL_EXIT.get(stopped, 1) if stopped else result.exit_code
        raise typer.Exit(code if stopped or not problem else EXIT_USAGE)

    def write(self, result) -> str | None:
        """Every report; what went wrong writing the `--output` one, if anything."""
        from ..report import render, to_github, to_html, to_json, to_junit

        format, into_file, verbose = self.format, self.into_file, self.verbose
        writers = {
            Format.json: lambda: to_json(result, tool_version=__version__, verbose=verbose),
            Format.junit: lambda: to_junit(result),
            Format.github: lambda: to_github(result),
            Format.html: lambda: to_html(result, tool_version=__version__),
        }
        if self.rich_to_stdout:
            render(result, self.console, verbose=verbose, quiet=self.quiet, problems=False)
            if format is Format.github and into_file is not Format.github:
                typer.echo(writers[format](), nl=False)  # people read the report, the runner these
        else:
            typer.echo(writers[format]())
        if self.durations is not None:
            _print_durations(result, self.durations, stderr=not self.rich_to_stdout)
        if self.output is None:
            return None
        from ..util.atomic import write_report

        text = writers[into_file]() if into_file in writers else _plain_report(result, verbose)
        try:
            write_report(self.output, text)
        except OSError as e:
            return f"cannot write the report to {self.output}: {e.strerror or e}"
        return None


def _write_repro(folder: Path, engine: str, items, result) -> str | None:
    """--repro: the scripts, and a line on stderr saying where (or why there are none);
    what went wrong writing them, if anything."""
    from ..diagnosis.repro import write_repros

    try:
        written, notes = write_repros(folder, items, result, engine)
    except OSError as e:
        return f"cannot write --repro scripts to {folder}: {e.strerror or e}"
    for note in notes:
        echo_err(f"gradcheck: --repro: {note}")
    if written:
        echo_err(f"gradcheck: --repro: {len(written)} script(s) in {folder}: {written[0]}" +
                 (" ..." if len(written) > 1 else ""))  # fmt: skip
    elif not notes:
        echo_err("gradcheck: --repro: no case failed, no script written")
    return None


def _file_format(format: Format | None, output: Path) -> Format:
    """What `--output` gets: --format's file format, else the one the file's suffix names,
    else --format's (rich: the plain-text report). So `--output report.html` beside the
    rich report or the GitHub annotations writes the page."""
    if format in FILE_FORMATS:
        return format
    return SUFFIX_FORMATS.get(output.suffix.lower(), format or Format.rich)


def _print_durations(result, count: int, *, stderr: bool) -> None:
    """pytest's --durations: the `count` slowest cases (0: all), slowest first.

    After the summary; on stderr when stdout carries the JSON or JUnit report.
    """
    ran = sorted((c for c in result.cases if c.status != "invalid"), key=lambda c: -c.duration_s)
    lines = [f"{c.duration_s:.2f}s {c.file}::{c.name}" for c in (ran[:count] if count else ran)]
    heading = f"slowest {count} durations" if count else "slowest durations"
    typer.echo("\n".join([heading, *lines]), err=stderr)


def _plain_report(result, verbose: bool) -> str:
    import io

    from rich.console import Console

    from ..report import render

    buffer = io.StringIO()
    render(result, Console(file=buffer, no_color=True, width=100, highlight=False), verbose=verbose)
    return buffer.getvalue()
