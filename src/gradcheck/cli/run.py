"""`gradcheck run`: check the cases, then write the reports (the terminal's, and --output's)."""

from __future__ import annotations

import contextlib
import enum
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand

from .. import __version__
from ..defaults import MAX_ELEMENTS, STALE_CHECK_LIMIT, TIMEOUT
from ..errors import GradcheckError
from .cases import print_problems
from .common import (
    DEFAULT_PATHS,
    EXIT_USAGE,
    Isolate,
    OpsFiles,
    Paths,
    Reference,
    app,
    boundary,
    echo_err,
    engine_factory,
    load_ops,
    reference_cache,
    stdout_console,
)


class Format(str, enum.Enum):
    rich = "rich"
    json = "json"
    junit = "junit"
    github = "github"  # the rich report, then GitHub Actions annotations
    html = "html"  # a page to look at (SPEC §11)


FILE_FORMATS = (Format.json, Format.junit, Format.html)
SUFFIX_FORMATS = {".html": Format.html, ".htm": Format.html, ".json": Format.json,
                  ".xml": Format.junit}  # fmt: skip


class Diagnose(str, enum.Enum):
    first = "first"
    all = "all"


class RunCommand(TyperCommand):
    """`run`'s parser: `--diagnose` was a flag before it took a value, so a bare
    `--diagnose` (not followed by first or all) still means the default, first."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, bare_diagnose(args))


def bare_diagnose(args: list[str]) -> list[str]:
    """`args` with a bare `--diagnose` spelled `--diagnose=first` (before any `--`)."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        if arg == "--diagnose" and (i + 1 == len(out) or out[i + 1] not in Diagnose.__members__):
            out[i] = f"--diagnose={Diagnose.first.value}"
    return out


@app.command(cls=RunCommand)
@boundary
def run(
    paths: Paths = None,
    ops_files: OpsFiles = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            "-e",
            help="builtin; torch, jax, autograd or tensorflow (the ready adapters); "
            "path/file.py[:Class] or pkg.module[:Class].",
        ),
    ] = "builtin",
    keyword: Annotated[
        str | None,
        typer.Option("-k", help="Only cases whose name or tag matches (not/and/or)."),
    ] = None,
    fail_fast: Annotated[
        bool, typer.Option("-x", "--fail-fast", help="Stop at the first failure.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Arrays and passing inputs too.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="Failures and the summary only.")
    ] = False,
    format: Annotated[
        Format | None, typer.Option("--format", "-f", help="Report format [default: rich].")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the report here (atomically): in --format's file format, else the "
            "suffix's (.html, .json, .xml for JUnit, other: plain text). The terminal keeps "
            "the rich report.",
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option(help="Unsupported cases fail instead of being skipped.")
    ] = False,
    rtol: Annotated[float | None, typer.Option(help="Override every case's rtol.", min=0)] = None,
    atol: Annotated[float | None, typer.Option(help="Override every case's atol.", min=0)] = None,
    max_elements: Annotated[
        int, typer.Option(help="Refuse inputs larger than this.", min=1)
    ] = MAX_ELEMENTS,
    diagnose: Annotated[
        Diagnose,
        typer.Option(
            "--diagnose",
            help="Explain failures: first (a case that a fingerprint found on an earlier case "
            "reproduces is not probed again) or all (every failing case in full). A bare "
            "--diagnose is first.",
        ),
    ] = Diagnose.first,
    no_diagnose: Annotated[
        bool, typer.Option("--no-diagnose", help="Only compare: no diagnosis at all.")
    ] = False,
    durations: Annotated[
        int | None,
        typer.Option(
            help="List the N slowest cases after the summary (0: every case).", metavar="N", min=0
        ),
    ] = None,
    stale_check_limit: Annotated[
        int,
        typer.Option(
            help="Ask the engine for the gradients a second time (the stale-gradients check) "
            "only in cases with at most N input elements (0: every case).",
            metavar="N",
            min=0,
        ),
    ] = STALE_CHECK_LIMIT,
    cache: Annotated[
        bool,
        typer.Option(help="Reuse TensorFlow's results from earlier runs (--no-cache: recompute)."),
    ] = True,
    cache_dir: Annotated[
        Path, typer.Option(help="Where TensorFlow's results are kept between runs.")
    ] = Path(".gradcheck_cache"),
    reference: Annotated[
        Reference,
        typer.Option(
            help="What the gradients are checked against: TensorFlow, finite differences "
            "(numeric, no TensorFlow needed), or both (and where the two disagree); a case's "
            "own `reference:` wins."
        ),
    ] = Reference.tensorflow,
    require_cache: Annotated[
        bool,
        typer.Option(
            help="A reference missing from the cache (or from its lock, when there is one) "
            "is an error (exit 1) instead of being computed: for a CI that commits the "
            "cache and does not install TensorFlow. Nothing in the cache is changed."
        ),
    ] = False,
    isolate: Annotated[
        Isolate | None,
        typer.Option(
            help="Where the engine runs: process (worker processes; a crash, hang or exit "
            "is that case's error) or none (this process: for pdb) "
            "[default: process; none for the builtin engine].",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds the engine may take on one case (and again on its diagnosis) in "
            "a worker before the case is an error; a case's `timeout:` wins.",
            min=0.001,
            metavar="S",
        ),
    ] = TIMEOUT,
) -> None:
    """Check every case against TensorFlow (or finite differences)."""
    from ..cases import load_paths
    from ..interrupts import Interrupted, handled
    from ..runner import RunOptions, default_isolation, needs_tensorflow, prefetch_tensorflow

    if require_cache and not cache:
        raise GradcheckError("--require-cache needs the cache; drop --no-cache")
    with handled():
        options = RunOptions(
            strict=strict,
            fail_fast=fail_fast,
            diagnose=False if no_diagnose else diagnose.value,
            cache=reference_cache(cache_dir if cache else None, read_only=require_cache),
            require_cache=require_cache,
            stale_check_limit=stale_check_limit or None,
            reference=reference.value,
            isolate=isolate.value if isolate else default_isolation(engine),
            timeout=timeout,
        )
        if needs_tensorflow(options):
            prefetch_tensorflow()  # at once: it imports while the files load
        try:
            load_ops(ops_files)
            items = load_paths(
                paths or DEFAULT_PATHS,
                keyword=keyword,
                max_elements=max_elements,
                rtol=rtol,
                atol=atol,
            )
            print_problems(items)  # case-file problems on stderr, before anything runs
            # What an engine's module prints on import is not the report's: stdout may
            # carry JSON. (Its cases' output is captured with each case.)
            with contextlib.redirect_stdout(sys.stderr):
                engine_arg = engine if options.isolate == "process" else engine_factory(engine)
        except Interrupted as stop:
            echo_err(f"gradcheck: interrupted by {stop.signal} before any case ran")
            raise typer.Exit(_signal_exit(stop.signal)) from None
        output = (
            Path(os.path.abspath(output)) if output is not None else None
        )  # an engine may chdir
        report = _Report(format, output, verbose=verbose, quiet=quiet, durations=durations)
        report.run(items, engine_arg, options)


def _signal_exit(signal_name: str) -> int:
    from ..results import SIGNAL_EXIT

    return SIGNAL_EXIT.get(signal_name, 1)


class _Report:
    """Run the cases with a progress bar, then write the reports: the terminal's, and the
    one `--output` names. A report that cannot be written exits 2, after the terminal's."""

    def __init__(self, format: Format | None, output: Path | None, **settings) -> None:
        self.format = format
        self.output = output
        self.into_file = _file_format(format, output) if output is not None else None
        self.verbose = settings["verbose"]
        self.quiet = settings["quiet"]
        self.durations = settings["durations"]
        self.console = stdout_console()
        self.rich_to_stdout = format not in FILE_FORMATS or output is not None

    def run(self, items, engine, options) -> None:
        from ..interrupts import quiet
        from ..runner import run as run_cases

        with _progress(self.console, len(items), show=self.rich_to_stdout) as on_result:
            result = run_cases(items, engine, options, on_result=on_result)
        with quiet():  # a second ^C must not cut the report short
            problem = self.write(result)
        if problem:
            echo_err(f"gradcheck: error: {problem}")
        code = result.exit_code
        raise typer.Exit(code if result.interrupted or not problem else EXIT_USAGE)

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
        from ..atomic import write_report

        text = writers[into_file]() if into_file in writers else _plain_report(result, verbose)
        try:
            write_report(self.output, text)
        except OSError as e:
            return f"cannot write the report to {self.output}: {e.strerror or e}"
        return None


PROGRESS_MIN_CASES = 5  # shorter runs finish before a bar would be worth drawing


@contextlib.contextmanager
def _progress(console, total: int, *, show: bool):
    """A transient progress bar while the cases run, yielding the runner's `on_result`.

    Only on a terminal, for runs of more than PROGRESS_MIN_CASES cases, and never when
    stdout carries the JSON or JUnit report.
    """
    if not (show and console.is_terminal and total > PROGRESS_MIN_CASES):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True,
    )  # fmt: skip
    with bar:
        task = bar.add_task("checking", total=total)
        yield lambda case: bar.advance(task)


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
