"""`gradcheck fuzz` (SPEC §10): generate cases over the engine's ops, shrink each bug found."""

import contextlib
import enum
import json
import os
from pathlib import Path
from typing import Annotated

import typer

from .. import __version__
from ..config import DEFAULTS
from ..errors import UsageError
from .common import (
    EngineOption,
    Reference,
    app,
    boundary,
    engine_factory,
    load_ops,
    run_settings,
    stdout_console,
)

DEFAULT_FUZZ_EXAMPLES = 1000
DEFAULT_FUZZ_SECONDS = 120.0


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
    engine: EngineOption = None,
    ops: Annotated[
        list[str] | None,
        typer.Option(
            help="Only these ops, comma-separated (default: every op the engine has); or a "
            "Python file of user-defined ops to load (gradcheck.op), as for run (default: the "
            "config file's). Repeatable.",
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
        typer.Option(
            help="Reuse TensorFlow's results kept here (default: no cache, whatever the "
            "config file says: fuzzed cases are new every run, and would only fill it)."
        ),
    ] = None,
    reference: Annotated[
        Reference | None,
        typer.Option(
            help="What a failing example is confirmed against, as for run.",
            show_default=DEFAULTS.reference,
        ),
    ] = None,
) -> None:
    """Generate cases over the engine's ops; shrink each bug found.

    Each bug becomes a small case file that `gradcheck run` reproduces, printed, or
    written with --out.
    """
    import secrets

    from ..fuzzing import Budget, fuzz_engine
    from ..fuzzing.report import fuzz_to_dict, render_fuzz

    if out is not None:
        _check_out(out)  # before the search: a finding must not be lost to a bad --out
    names, ops_files = _ops_and_files(ops)
    given = dict(
        engine=engine, ops=ops_files or None, reference=reference.value if reference else None,
        cache=cache_dir is not None, cache_dir=cache_dir,
    )  # fmt: skip
    settings = run_settings(given)
    load_ops(list(settings.ops))
    options = settings.run_options(settings.engine, isolate="none")  # the engine runs here
    run_seed = secrets.randbelow(2**32) if seed is None else seed
    console = stdout_console()
    with _fuzz_progress(show=format is FuzzFormat.rich) as on_progress:
        result = fuzz_engine(
            engine_factory(settings),
            ops=names,
            dtypes=_names(dtype) or [],
            max_ops=max_ops,
            max_rank=max_rank,
            budget=Budget(max_examples, time, 1 if fail_fast else None),
            seed=run_seed,
            out=out,
            engine_spec=settings.engine if settings.engine != "builtin" else None,
            options=options,
            on_progress=on_progress,
        )
    if format is FuzzFormat.json:
        typer.echo(json.dumps(fuzz_to_dict(result, tool_version=__version__), indent=2))
    else:
        render_fuzz(result, console, quiet=quiet)
    raise typer.Exit(result.exit_code)


def _check_out(out: Path) -> None:
    """`UsageError` unless --out is a folder, or one that can be made, and writable."""
    there = out
    while not there.exists() and there != there.parent:
        there = there.parent
    if not there.is_dir():
        raise UsageError(f"--out {out}: {there} is not a folder")
    if not os.access(there, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: {there} is not writable")


@contextlib.contextmanager
def _fuzz_progress(*, show: bool):
    """A transient line on a terminal's stderr: examples tried, bugs found, time left."""
    from rich.console import Console

    from ..fuzzing.report import progress_line

    console = Console(stderr=True, highlight=False)
    if not (show and console.is_terminal):
        yield None
        return
    with console.status("fuzzing") as status:
        yield lambda progress: status.update(progress_line(progress))
