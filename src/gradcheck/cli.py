"""The command line (SPEC §5).

Exit codes: 0 every case passed or was skipped; 1 a gradient or forward mismatch, or an
engine error; 2 a usage error or an invalid case file (after every problem is reported).
Reports go to stdout, problems with the command line to stderr. TensorFlow is imported
only by `run`, and only when a case needs a reference.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import __version__
from .errors import GradcheckError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Check an autodiff engine's gradients against TensorFlow and explain every mismatch.",
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_PATHS = [Path("cases")]


class Format(str, enum.Enum):
    rich = "rich"
    json = "json"
    junit = "junit"


Paths = Annotated[
    Optional[list[Path]],  # noqa: UP045  (typer reads the annotation at run time on 3.10)
    typer.Argument(help="Case files or folders searched for *.yaml/*.yml [default: cases/]."),
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


@app.command()
@boundary
def run(
    paths: Paths = None,
    engine: Annotated[
        str,
        typer.Option("--engine", "-e", help="builtin, path/file.py[:Class] or pkg.module[:Class]."),
    ] = "builtin",
    keyword: Annotated[
        Optional[str],  # noqa: UP045
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
    format: Annotated[Format, typer.Option("--format", "-f", help="Report format.")] = Format.rich,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--output",
            "-o",
            help="Write the report here (atomically); the terminal still gets the rich report.",
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option(help="Unsupported cases fail instead of being skipped.")
    ] = False,
    rtol: Annotated[
        float | None, typer.Option(help="Override every case's rtol.", min=0)
    ] = None,
    atol: Annotated[
        float | None, typer.Option(help="Override every case's atol.", min=0)
    ] = None,
    max_elements: Annotated[
        int, typer.Option(help="Refuse inputs larger than this.", min=1)
    ] = 10_000_000,
    diagnose: Annotated[
        bool, typer.Option(help="Explain failures (--no-diagnose: only compare).")
    ] = True,
) -> None:
    """Check every case against TensorFlow."""
    from .report import render, to_json, to_junit
    from .runner import RunOptions
    from .runner import run as run_cases

    items = _load(paths, keyword, max_elements=max_elements, rtol=rtol, atol=atol)
    factory = _engine(engine)
    options = RunOptions(strict=strict, fail_fast=fail_fast, diagnose=diagnose)
    result = run_cases(items, factory, options)

    writers = {
        Format.json: lambda: to_json(result, tool_version=__version__, verbose=verbose),
        Format.junit: lambda: to_junit(result),
    }
    if output is not None:
        from .atomic import write_atomic

        text = writers[format]() if format in writers else _plain_report(result, verbose)
        write_atomic(output, text)
    if format in writers and output is None:
        typer.echo(writers[format]())
    else:
        render(result, _console(), verbose=verbose, quiet=quiet)
    raise typer.Exit(result.exit_code)


@app.command("list")
@boundary
def list_cases(
    paths: Paths = None,
    keyword: Annotated[Optional[str], typer.Option("-k", help="Only matching cases.")] = None,  # noqa: UP045
) -> None:
    """List the cases the paths hold, and every problem in their files."""
    from rich.markup import escape

    from .cases import Case

    items = _load(paths, keyword)
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


@app.command()
@boundary
def ops() -> None:
    """Every op an expression may use: signature, TensorFlow mapping, meaning."""
    from rich.table import Table

    from .ops import all_ops

    table = Table(box=None, pad_edge=False)
    for column in ("op", "TensorFlow", "operator", "meaning"):
        table.add_column(column)
    for op in all_ops():
        operator = {"u-": "-x"}.get(op.operator or "", op.operator or "")
        table.add_row(op.signature, op.tf_name, operator, op.doc)
    _console().print(table)


@app.command()
@boundary
def faults() -> None:
    """The catalogue of known autodiff bugs the diagnosis fingerprints."""
    from rich.markup import escape
    from rich.table import Table

    from .diagnosis.faults import CATALOGUE

    table = Table(box=None, pad_edge=False, show_lines=False)
    table.add_column("fault")
    table.add_column("the bug, and its fix")
    for fault in CATALOGUE:
        table.add_row(fault.code, f"{escape(fault.summary)}.\n[dim]fix: {escape(fault.fix)}[/dim]")
    _console().print(table)


@app.command()
@boundary
def schema() -> None:
    """The JSON Schema (draft 2020-12) of case files, for editors and validators."""
    from .cases import case_file_schema

    typer.echo(json.dumps(case_file_schema(), indent=2))


def _load(paths, keyword, **options):
    from .cases import Case, discover, load_file
    from .cases.selection import matches

    items = [
        item for path in discover(paths or DEFAULT_PATHS) for item in load_file(path, **options)
    ]
    if keyword:
        items = [i for i in items if not isinstance(i, Case) or matches(keyword, i.name, i.tags)]
    return items


def _engine(spec: str):
    from .engines.adapters import load_engine

    return load_engine(spec)


def _console():
    from rich.console import Console

    return Console(highlight=False)


def _plain_report(result, verbose: bool) -> str:
    import io

    from rich.console import Console

    from .report import render

    buffer = io.StringIO()
    render(result, Console(file=buffer, no_color=True, width=100, highlight=False), verbose=verbose)
    return buffer.getvalue()


def _err(message: str) -> None:
    typer.echo(message, err=True)


def main() -> None:
    """Console-script entry point."""
    app()
