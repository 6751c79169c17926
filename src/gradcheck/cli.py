"""The command line (SPEC §5).

Exit codes: 0 every case passed or was skipped; 1 a gradient or forward mismatch, or an
engine error; 2 a usage error, an invalid case file (after every problem is reported) or
a report that cannot be written (after the terminal report); 130 or 143 a run stopped by
SIGINT or SIGTERM (after the report of what it checked). Reports go to stdout, problems
with the command line to stderr. TensorFlow is imported only by `run`, in the background
from its start, and only when a case may need a reference the cache (`--cache-dir`,
default `.gradcheck_cache/`) does not hold; under `--require-cache` such a case is an
error (exit 1). `fuzz` (SPEC §10): 1 when it found a bug, 0 when none in its budget, 2 a
usage error.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand

from . import __version__
from .defaults import MAX_ELEMENTS, STALE_CHECK_LIMIT, TIMEOUT
from .errors import GradcheckError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Check an autodiff engine's gradients against TensorFlow and explain every mismatch.",
)

EXIT_OK, EXIT_USAGE = 0, 2  # 1 (a failure) is RunResult.exit_code's
DEFAULT_PATHS = [Path("cases")]
DEFAULT_FUZZ_EXAMPLES = 1000
DEFAULT_FUZZ_SECONDS = 120.0


class Reference(str, enum.Enum):
    tensorflow = "tensorflow"
    numeric = "numeric"  # finite differences of the NumPy forward; never imports TensorFlow
    both = "both"


class Isolate(str, enum.Enum):
    process = "process"
    none = "none"


class Format(str, enum.Enum):
    rich = "rich"
    json = "json"
    junit = "junit"
    github = "github"  # the rich report, then GitHub Actions annotations
    html = "html"  # a page to look at (SPEC §11)


FILE_FORMATS = (Format.json, Format.junit, Format.html)
SUFFIX_FORMATS = {".html": Format.html, ".htm": Format.html, ".json": Format.json,
                  ".xml": Format.junit}  # fmt: skip


Paths = Annotated[
    list[Path] | None,
    typer.Argument(help="Case files or folders searched for *.yaml/*.yml [default: cases/]."),
]
OpsFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--ops", help="A Python file declaring user-defined ops (gradcheck.op); repeatable."
    ),
]


def boundary(command: Callable[..., None]) -> Callable[..., None]:
    """The one place a domain error becomes a message on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
        except GradcheckError as e:
            _err(f"gradcheck: error: {e}")
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradcheck {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Check an autodiff engine's gradients against TensorFlow and explain every mismatch."""


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
    """Check every case against TensorFlow (or finite differences: --reference)."""
    from .cases import load_paths
    from .interrupts import Interrupted, handled
    from .runner import RunOptions, default_isolation, needs_tensorflow, prefetch_tensorflow

    if require_cache and not cache:
        raise GradcheckError("--require-cache needs the cache; drop --no-cache")
    with handled():
        options = RunOptions(
            strict=strict,
            fail_fast=fail_fast,
            diagnose=False if no_diagnose else diagnose.value,
            cache=_cache(cache_dir if cache else None, read_only=require_cache),
            require_cache=require_cache,
            stale_check_limit=stale_check_limit or None,
            reference=reference.value,
            isolate=isolate.value if isolate else default_isolation(engine),
            timeout=timeout,
        )
        if needs_tensorflow(options):
            prefetch_tensorflow()  # at once: it imports while the files load
        try:
            _load_ops(ops_files)
            items = load_paths(
                paths or DEFAULT_PATHS,
                keyword=keyword,
                max_elements=max_elements,
                rtol=rtol,
                atol=atol,
            )
            engine_arg = engine if options.isolate == "process" else _engine(engine)
        except Interrupted as stop:
            _err(f"gradcheck: interrupted by {stop.signal} before any case ran")
            raise typer.Exit(_signal_exit(stop.signal)) from None
        output = (
            Path(os.path.abspath(output)) if output is not None else None
        )  # an engine may chdir
        report = _Report(format, output, verbose=verbose, quiet=quiet, durations=durations)
        report.run(items, engine_arg, options)


def _signal_exit(signal_name: str) -> int:
    from .results import SIGNAL_EXIT

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
        self.console = _console()
        self.rich_to_stdout = format not in FILE_FORMATS or output is not None

    def run(self, items, engine, options) -> None:
        from .interrupts import quiet
        from .runner import run as run_cases

        with _progress(self.console, len(items), show=self.rich_to_stdout) as on_result:
            result = run_cases(items, engine, options, on_result=on_result)
        with quiet():  # a second ^C must not cut the report short
            problem = self.write(result)
        if problem:
            _err(f"gradcheck: error: {problem}")
        code = result.exit_code
        raise typer.Exit(code if result.interrupted or not problem else EXIT_USAGE)

    def write(self, result) -> str | None:
        """Every report; what went wrong writing the `--output` one, if anything."""
        from .report import render, to_github, to_html, to_json, to_junit

        format, into_file, verbose = self.format, self.into_file, self.verbose
        writers = {
            Format.json: lambda: to_json(result, tool_version=__version__, verbose=verbose),
            Format.junit: lambda: to_junit(result),
            Format.github: lambda: to_github(result),
            Format.html: lambda: to_html(result, tool_version=__version__),
        }
        if self.rich_to_stdout:
            render(result, self.console, verbose=verbose, quiet=self.quiet)
            if format is Format.github and into_file is not Format.github:
                typer.echo(writers[format](), nl=False)  # people read the report, the runner these
        else:
            typer.echo(writers[format]())
        if self.durations is not None:
            _print_durations(result, self.durations, stderr=not self.rich_to_stdout)
        if self.output is None:
            return None
        from .atomic import write_report

        text = writers[into_file]() if into_file in writers else _plain_report(result, verbose)
        try:
            write_report(self.output, text)
        except OSError as e:
            return f"cannot write the report to {self.output}: {e.strerror or e}"
        return None


class FuzzFormat(str, enum.Enum):
    rich = "rich"
    json = "json"


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [n.strip() for n in text.split(",") if n.strip()]


def _ops_and_files(values: list[str] | None) -> tuple[list[str] | None, list[Path]]:
    """`fuzz --ops`: op names (SPEC §10, comma-separated) and ops files (SPEC §9, `*.py`),
    told apart by the suffix, since an op's name is an identifier."""
    files = [Path(v) for v in values or [] if v.endswith(".py")]
    names = [n for v in values or [] if not v.endswith(".py") for n in _names(v) or []]
    return (names or None), files


@app.command()
@boundary
def fuzz(
    engine: Annotated[
        str,
        typer.Option("--engine", "-e", help="builtin, path/file.py[:Class] or pkg.module[:Class]."),
    ] = "builtin",
    ops: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these ops, comma-separated (default: every op the engine has); or a "
            "Python file of user-defined ops to load (gradcheck.op), as for run. Repeatable.",
            metavar="A,B,...|FILE.py",
        ),
    ] = None,
    max_examples: Annotated[
        int, typer.Option(help="Stop after this many examples.", min=1)
    ] = DEFAULT_FUZZ_EXAMPLES,
    time: Annotated[
        float | None,
        typer.Option(
            "--time",
            help="Stop searching after this many seconds (a bug being shrunk is finished).",
            metavar="SECONDS",
            min=0,
        ),
    ] = DEFAULT_FUZZ_SECONDS,
    max_ops: Annotated[int, typer.Option(help="Ops per generated case, at most.", min=1)] = 4,
    max_rank: Annotated[int, typer.Option(help="Axes per input, at most.", min=0)] = 3,
    seed: Annotated[
        int | None,
        typer.Option(help="Seed the run, to repeat it (default: a new one, printed).", min=0),
    ] = None,
    fail_fast: Annotated[
        bool, typer.Option("-x", "--fail-fast", help="Stop at the first bug (once shrunk).")
    ] = False,
    dtype: Annotated[
        str, typer.Option(help="Dtypes to draw from, comma-separated.", metavar="D,...")
    ] = "float64,float32",
    out: Annotated[
        Path | None,
        typer.Option(help="Write each bug's case file here (default: print it, write nothing)."),
    ] = None,
    format: Annotated[
        FuzzFormat, typer.Option("--format", "-f", help="Report format.")
    ] = FuzzFormat.rich,
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="Bugs and the summary only.")
    ] = False,
    cache_dir: Annotated[
        Path | None,
        typer.Option(help="Reuse TensorFlow's results kept here (default: no cache)."),
    ] = None,
    reference: Annotated[
        Reference,
        typer.Option(help="What a failing example is confirmed against, as for run."),
    ] = Reference.tensorflow,
) -> None:
    """Generate cases over the engine's ops, and shrink each bug found to a case file."""
    import secrets

    from .fuzzing import Budget, fuzz_engine
    from .fuzzing.report import fuzz_to_dict, render_fuzz
    from .runner import RunOptions

    names, ops_files = _ops_and_files(ops)
    _load_ops(ops_files)
    options = RunOptions(cache=_cache(cache_dir), reference=reference.value)
    run_seed = secrets.randbelow(2**32) if seed is None else seed
    console = _console()
    with _fuzz_progress(show=format is FuzzFormat.rich) as on_progress:
        result = fuzz_engine(
            _engine(engine),
            ops=names,
            dtypes=_names(dtype) or [],
            max_ops=max_ops,
            max_rank=max_rank,
            budget=Budget(max_examples, time, 1 if fail_fast else None),
            seed=run_seed,
            out=out,
            engine_spec=engine if engine != "builtin" else None,
            options=options,
            on_progress=on_progress,
        )
    if format is FuzzFormat.json:
        typer.echo(json.dumps(fuzz_to_dict(result, tool_version=__version__), indent=2))
    else:
        render_fuzz(result, console, quiet=quiet)
    raise typer.Exit(result.exit_code)


@contextlib.contextmanager
def _fuzz_progress(*, show: bool):
    """A transient line on a terminal's stderr: examples tried, bugs found, time left."""
    from rich.console import Console

    from .fuzzing.report import progress_line

    console = Console(stderr=True, highlight=False)
    if not (show and console.is_terminal):
        yield None
        return
    with console.status("fuzzing") as status:
        yield lambda progress: status.update(progress_line(progress))


@app.command("list")
@boundary
def list_cases(
    paths: Paths = None,
    ops_files: OpsFiles = None,
    keyword: Annotated[str | None, typer.Option("-k", help="Only matching cases.")] = None,
) -> None:
    """List the cases the paths hold, and every problem in their files."""
    from rich.markup import escape

    from .cases import Case, load_paths

    _load_ops(ops_files)
    items = load_paths(paths or DEFAULT_PATHS, keyword=keyword)
    console = _console()
    for item in items:
        if isinstance(item, Case):
            expr = escape(" ".join(item.expr.split()))
            tags = f"  [dim]\\[{escape(', '.join(item.tags))}][/dim]" if item.tags else ""
            where = f"{escape(item.location)}::{escape(item.name)}"
            console.print(f"{where}  {expr}{tags}", soft_wrap=True)
        else:
            _err(f"{item.location}: {item.message}")
    invalid = sum(1 for i in items if not isinstance(i, Case))
    console.print(f"{len(items) - invalid} cases" + (f", {invalid} invalid" if invalid else ""))
    raise typer.Exit(EXIT_USAGE if invalid else EXIT_OK)


class Spelling(str, enum.Enum):
    numpy = "numpy"
    tensorflow = "tensorflow"


@app.command()
@boundary
def ops(
    ops_files: OpsFiles = None,
    rules: Annotated[bool, typer.Option("--rules", help="Add each op's VJP rules.")] = False,
    spelling: Annotated[
        Spelling | None,
        typer.Option(help="The VJP rules in NumPy or TensorFlow spelling (implies --rules)."),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="A Markdown table (docs/ops.md), both spellings.")
    ] = False,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            "-e",
            help="Also say which ops this engine implements and which it lacks (the engine "
            "is imported and made, no case is run).",
        ),
    ] = None,
) -> None:
    """Every op an expression may use: signature, TensorFlow mapping, meaning, VJP rules."""
    from rich.table import Table
    from rich.text import Text

    from .ops import all_ops

    _load_ops(ops_files)
    if markdown:
        typer.echo(_ops_markdown(), nl=False)
        return
    found = _coverage(engine) if engine is not None else None
    spell = (spelling or Spelling.numpy).value if rules or spelling else None
    table = Table(box=None, pad_edge=False)
    for column in ("op", "TensorFlow", "operator", "meaning"):
        table.add_column(column)
    if found:
        table.add_column("engine", no_wrap=True)
    if spell:
        table.add_column(f"VJP ({spell})", overflow="fold", min_width=24)
    for op in all_ops():
        operator = {"u-": "-x"}.get(op.operator or "", op.operator or "")
        # Text, not markup: `concat([values, ...], axis=0)` would lose its `[values, ...]`.
        tf_name = op.tf_name or "none: --reference numeric"
        doc = f"{op.doc} [user op, {op.origin}]" if op.origin else op.doc
        cells = [op.signature, tf_name, operator, doc]
        if found:
            cells.append(_has(found, op.name))
        if spell:
            cells.append("\n".join(_rule_lines(op, spell)))
        table.add_row(*map(Text, cells))
    console = _console()
    console.print(table)
    if found:
        console.print(Text(_coverage_line(engine or "", found)))


def _coverage(spec: str):
    from .diagnosis.report_card import coverage
    from .engines.driver import EngineFailure, call_engine
    from .ops import all_ops

    factory = _engine(spec)
    try:
        instance = call_engine("creating the engine", factory)
    except EngineFailure as e:
        raise GradcheckError(f"--engine {spec}: {e.message}") from None
    return coverage(instance, all_ops())


def _has(found, op: str) -> str:
    if op in found.implements:
        return "yes"
    return "stub" if op in found.stubs else "missing"


def _coverage_line(spec: str, found) -> str:
    """`engine ... implements 12 of 35 ops; lacks: ...`, and the adapter methods it lacks."""
    total = len(found.implements) + len(found.stubs) + len(found.lacks)
    parts = [f"engine {spec} implements {len(found.implements)} of {total} ops"]
    if found.lacks:
        parts.append(f"lacks: {', '.join(found.lacks)}")
    if found.stubs:
        parts.append(f"stubs that raise NotImplementedError: {', '.join(found.stubs)}")
    if found.protocol:
        parts.append(f"and no working {', '.join(found.protocol)} yet (SPEC §4)")
    return "; ".join(parts)


def _rule_lines(op, spelling: str) -> list[str]:
    """`param: rule` per VJP of `op`, as its declaration writes them."""
    if op.rule(0, spelling) is None:
        return []
    params = [f"{op.params[0]}[i]"] if op.variadic else list(op.params)
    return [f"{p}: {op.rule(i, spelling)}" for i, p in enumerate(params)]


def _ops_markdown() -> str:
    """docs/ops.md: the op registry as a page (a test keeps the file equal to this)."""
    from .ops import all_ops

    lines = [
        "# Ops and their VJP rules",
        "",
        "Generated by `gradcheck ops --markdown` from the op registry "
        "(`src/gradcheck/ops/`); do not edit by hand.",
        "",
        "In the rules `g` is the cotangent, `y` the op's output; for reductions `axis` is",
        "the tuple of reduced axes, `kept_shape` x's shape with them as size 1 and `n` the",
        "number of elements each output summarises. Elementwise rules give the broadcast",
        "shape, which is then summed back to each argument's shape (unbroadcast).",
        "",
        "| op | TensorFlow | meaning | VJP (NumPy) | VJP (TensorFlow) |",
        "|---|---|---|---|---|",
    ]
    for op in all_ops():
        numpy = "<br>".join(f"`{line}`" for line in _rule_lines(op, "numpy"))
        tf = "<br>".join(f"`{line}`" for line in _rule_lines(op, "tensorflow"))
        cells = (f"`{op.signature}`", f"`{op.tf_name or 'none'}`", op.doc, numpy, tf)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


@app.command()
@boundary
def faults() -> None:
    """The catalogue of known autodiff bugs the diagnosis fingerprints."""
    from rich.markup import escape
    from rich.table import Table

    from .diagnosis.catalogue import CATALOGUE

    table = Table(box=None, pad_edge=False, show_lines=False)
    table.add_column("fault")
    table.add_column("the bug, and its fix")
    for fault in CATALOGUE:
        seen = f"\n[dim]seen: {escape(fault.seen)}[/dim]" if fault.seen else ""
        table.add_row(
            fault.code, f"{escape(fault.summary)}.\n[dim]fix: {escape(fault.fix)}[/dim]{seen}"
        )
    _console().print(table)


@app.command()
@boundary
def schema(ops_files: OpsFiles = None) -> None:
    """The JSON Schema (draft 2020-12) of case files, for editors and validators."""
    from .cases import case_file_schema

    _load_ops(ops_files)
    typer.echo(json.dumps(case_file_schema(), indent=2))


@app.command("init-engine")
@boundary
def init_engine(
    path: Annotated[Path, typer.Argument(help="The adapter file to write, e.g. my_engine.py.")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    ops_files: OpsFiles = None,
) -> None:
    """Write an engine adapter template (every op, stubbed) and a first case file next to it."""
    from .scaffold import write_scaffold

    _load_ops(ops_files)
    engine_file, cases_file = write_scaffold(path, force=force)
    typer.echo(f"wrote {engine_file} (an adapter with a stub for every op)")
    typer.echo(f"wrote {cases_file} (two cases needing mul and sum)")
    typer.echo("fill in leaf, value, grad and the ops your engine has, then run")
    typer.echo(f"  gradcheck run {cases_file} --engine {engine_file}")


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


def _load_ops(paths: list[Path] | None) -> None:
    if paths:
        from .ops.user import load_ops_files

        load_ops_files(paths)


def _cache(directory: Path | None, *, read_only: bool = False):
    """The reference cache in `directory` (absolute: an engine running in this process may
    change the working directory), or None; `read_only` for --require-cache."""
    from .cache import ReferenceCache

    if directory is None:
        return None
    return ReferenceCache(Path(os.path.abspath(directory)), read_only=read_only)


def _engine(spec: str):
    from .engines.adapters import load_engine

    return load_engine(spec)


def _console():
    from rich.console import Console

    # emoji=False: `cases/x.yaml:100::name` must not print as `cases/x.yaml💯:name`.
    # file: bound now, as an engine running in this process has sys.stdout captured.
    return Console(file=sys.stdout, highlight=False, emoji=False)


def _plain_report(result, verbose: bool) -> str:
    import io

    from rich.console import Console

    from .report import render

    buffer = io.StringIO()
    render(result, Console(file=buffer, no_color=True, width=100, highlight=False), verbose=verbose)
    return buffer.getvalue()


def _err(message: str) -> None:
    typer.echo(message, err=True)


from .cache_cli import cache_app  # noqa: E402  (it uses this module's helpers)

app.add_typer(cache_app, name="cache")


def main() -> None:
    """Console-script entry point."""
    from .stderr import python_stderr_kept

    try:
        with python_stderr_kept():  # messages reach stderr while TensorFlow imports
            app()
    except SystemExit as done:
        _exit(done.code)
    _exit(0)


def _exit(code: object) -> None:
    """Exit with `code`, even when an engine running in this process left a thread behind
    (which would keep the interpreter from ever exiting)."""
    lingering = [
        t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon
    ]
    if not lingering:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
