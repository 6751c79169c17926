"""`gradcheck list` and `gradcheck init-engine`: the cases a folder holds, a first engine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import (
    EXIT_OK,
    EXIT_USAGE,
    OpsFiles,
    Paths,
    app,
    boundary,
    echo_err,
    load_ops,
    run_settings,
    stdout_console,
)


@app.command("list")
@boundary
def list_cases(
    paths: Paths = None,
    ops_files: OpsFiles = None,
    keyword: Annotated[str | None, typer.Option("-k", help="Only matching cases.")] = None,
) -> None:
    """List the cases the paths hold, and every problem in their files."""
    from rich.markup import escape

    from ..cases import Case, load_paths

    settings = run_settings({"paths": paths, "ops": ops_files})
    load_ops(list(settings.ops))
    items = load_paths(list(settings.paths), keyword=keyword)
    console = stdout_console()
    for item in items:
        if isinstance(item, Case):
            expr = escape(" ".join(item.expr.split()))
            tags = f"  [dim]\\[{escape(', '.join(item.tags))}][/dim]" if item.tags else ""
            where = f"{escape(item.location)}::{escape(item.name)}"
            console.print(f"{where}  {expr}{tags}", soft_wrap=True)
        else:
            echo_err(f"{item.location}: {item.message}")
    invalid = sum(1 for i in items if not isinstance(i, Case))
    console.print(f"{len(items) - invalid} cases" + (f", {invalid} invalid" if invalid else ""))
    raise typer.Exit(EXIT_USAGE if invalid else EXIT_OK)


@app.command("init-engine")
@boundary
def init_engine(
    path: Annotated[Path, typer.Argument(help="The adapter file to write, e.g. my_engine.py.")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    ops_files: OpsFiles = None,
) -> None:
    """Write an engine adapter template (every op, stubbed) and a first case file next to it."""
    from ..scaffold import write_scaffold

    load_ops(ops_files)
    engine_file, cases_file = write_scaffold(path, force=force)
    typer.echo(f"wrote {engine_file} (an adapter with a stub for every op)")
    typer.echo(f"wrote {cases_file} (two cases needing mul and sum)")
    typer.echo("fill in leaf, value, grad and the ops your engine has, then run")
    typer.echo(f"  gradcheck run {cases_file} --engine {engine_file}")
