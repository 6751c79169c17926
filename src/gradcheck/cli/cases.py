"""`gradcheck list` and `gradcheck init-engine`: the cases a folder holds, a first engine."""

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
    load_ops,
    load_user_ops,
    run_settings,
    stdout_console,
)


def print_problems(items) -> int:
    """The invalid cases among `items` on stderr, as `INVALID file:line: problem` lines
    (the same in `list` and `run`); how many there were."""
    import sys

    from ..cases import InvalidCase

    problems = [(i.location, i.message) for i in items if isinstance(i, InvalidCase)]
    if problems:
        from rich.console import Console

        from ..report import render_problems

        render_problems(problems, Console(file=sys.stderr, highlight=False, emoji=False))
    return len(problems)


@app.command("list")
@boundary
def list_cases(
    paths: Paths = None,
    ops_files: OpsFiles = None,
    keyword: Annotated[
        str | None,
        typer.Option("-k", help="Only cases whose name or tag matches.", metavar="EXPR"),
    ] = None,
) -> None:
    """List the cases and every problem in the case files."""
    from rich.console import Group

    from ..cases import Case, load_paths
    from ..report.text import plural, written_whole

    settings = run_settings({"paths": paths, "ops": ops_files})
    load_ops(list(settings.ops))
    items = load_paths(list(settings.paths), keyword=keyword)
    console = stdout_console()
    invalid = print_problems(items)
    listed = [_listed(item, console.width) for item in items if isinstance(item, Case)]
    with written_whole(console):  # in one print: a print a case took twice as long
        console.print(Group(*listed), soft_wrap=False, crop=False)
    console.print(
        plural(len(items) - invalid, "case") + (f", {invalid} invalid" if invalid else "")
    )
    raise typer.Exit(EXIT_USAGE if invalid else EXIT_OK)


def _listed(case, width: int):
    """`file:line::name  expr  [tags]` on one line when it fits; else the expression
    under the name, indented as a block, each of its lines wrapped at words."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    from ..report.text import expr_lines, printable

    lines = expr_lines(case.expr)
    # A case id is never broken: copied from the terminal, it must work as typed.
    head = Text(printable(f"{case.location}::{case.name}"), no_wrap=True, overflow="ignore")
    tags = Text(f"[{', '.join(case.tags)}]", style="dim") if case.tags else Text()
    one_line = Text.assemble(head, "  ", (lines[0] if lines else "", "cyan"))
    if tags:
        one_line.append_text(Text("  ").append_text(tags))
    if len(lines) <= 1 and one_line.cell_len <= width:
        return one_line
    body = [Text("\n".join(lines), style="cyan")]
    if tags and head.cell_len + 2 + tags.cell_len <= width:
        head = Text.assemble(head, "  ", tags)
    elif tags:
        body.append(tags)
    return Group(head, *(Padding(b, (0, 0, 0, 4), expand=False) for b in body))


@app.command("init-engine")
@boundary
def init_engine(
    path: Annotated[
        Path, typer.Argument(help="The adapter file to write, e.g. my_engine.py.", metavar="FILE")
    ],
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    ops_files: OpsFiles = None,
) -> None:
    """Write an engine adapter to fill in, and a first case file.

    The adapter has a stub for every op; the case file, beside it, two cases to start with.
    """
    from .scaffold import write_scaffold

    load_user_ops(ops_files)
    engine_file, cases_file = write_scaffold(path, force=force)
    typer.echo(f"wrote {engine_file} (an adapter with a stub for every op)")
    typer.echo(f"wrote {cases_file} (two cases needing mul and sum)")
    typer.echo("fill in leaf, value, grad and the ops your engine has, then run")
    typer.echo(f"  gradcheck run {cases_file} --engine {engine_file}")
