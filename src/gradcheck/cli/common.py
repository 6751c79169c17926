"""What every command shares: the app, the exit codes, the options several commands take,
and the one boundary where a domain error becomes exit 2.
"""

import enum
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from .. import __version__
from ..config import DEFAULTS, Settings
from ..errors import GradcheckError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Check an autodiff engine's gradients against TensorFlow and explain every mismatch.",
)

EXIT_OK, EXIT_USAGE = 0, 2  # 1 (a failure) is RunResult.exit_code's


class Reference(str, enum.Enum):
    tensorflow = "tensorflow"
    numeric = "numeric"  # finite differences of the NumPy forward; never imports TensorFlow
    both = "both"


class Isolate(str, enum.Enum):
    process = "process"
    none = "none"


Paths = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Case files or folders searched for *.yaml/*.yml [default: cases/].",
        metavar="PATHS",
        show_default=False,
    ),
]
EngineOption = Annotated[
    str | None,
    typer.Option(
        "--engine",
        "-e",
        help="builtin; torch, jax, autograd or tensorflow (the ready adapters); "
        "path/file.py[:Class] or pkg.module[:Class].",
        show_default=DEFAULTS.engine,
    ),
]
OpsFiles = Annotated[
    list[Path] | None,
    typer.Option(
        "--ops",
        help="A Python file declaring user-defined ops (gradcheck.op); repeatable.",
        metavar="FILE",
    ),
]


def boundary(command: Callable[..., None]) -> Callable[..., None]:
    """The one place a domain error becomes a message on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
        except GradcheckError as e:
            echo_err(f"gradcheck: error: {e}")
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


def load_ops(paths: list[Path] | None) -> None:
    if paths:
        from ..ops.user import load_ops_files

        load_ops_files(paths)


def load_user_ops(ops_files: list[Path] | None) -> None:
    """The --ops files given, else the config file's."""
    load_ops(list(run_settings({"ops": ops_files}).ops))


def run_settings(given: dict[str, object]) -> Settings:
    """A command's settings (`run`'s, which the others share): the options `given` (None:
    not given), else the config file's, else the defaults."""
    from ..config import option_name, settings

    return settings(given, option_name)


def engine_factory(settings: Settings):
    """The settings' engine, loaded here; its errors say where it was set."""
    from ..engines.loading import load_engine

    return load_engine(settings.engine, settings.engine_named())


def stdout_console():
    from rich.console import Console

    # emoji=False: `cases/x.yaml:100::name` must not print as `cases/x.yaml💯:name`.
    # file: bound now, as an engine running in this process has sys.stdout captured.
    return Console(file=sys.stdout, highlight=False, emoji=False)


def echo_err(message: str) -> None:
    typer.echo(message, err=True)
