"""`gradcheck check`: one expression from the command line, no case file.

    gradcheck check "tanh(x @ w)" -i x=3,4 -i w=4,2 --engine my.py --cotangent ones

The case is built from a mapping of case-file keys by the loader that reads case
files (`cases.loader.load_case`), so it is validated, and its problems are worded,
exactly as a case file's. Then `run` takes over with every other option given (its
whole command line: --engine, --format, --output, --repro, -v, --strict, ...), so the
report and the exit codes are `run`'s.

`-i NAME=SPEC`, where SPEC is either sizes (`3,4`; `()` for a scalar), optionally with
an init (`3,4:positive`; SPEC §2's normal, uniform, positive, integers), a random input
of that shape; or a literal as in a case file, in YAML's flow syntax (`[[1, 2], [3, 4]]`,
`0.5`). Bare integers are sizes, so a literal scalar is written with a dot: `x=2.0`.
An integer input (indices, labels) is its dtype and its numbers: `i=int64:0,2,2`, or
`i=int32:[[0, 1], [1, 1]]` (SPEC §3.1).
The case's dtype (`--dtype`) holds for every input, as in a case file.
"""

import re
from typing import Annotated, Any

import typer

from ..cases.dtypes import INTEGER_DTYPES
from ..errors import CaseFileError, UsageError
from .common import app

CASE_NAME = "check"  # random inputs and cotangents are seeded from it, as in the API
FILE = "<command line>"
_SIZES = re.compile(r"(?:\(\)|\d+(?:,\d+)*)(?::(\w+))?")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog="Every option of `gradcheck run` applies too (--engine, --format, --output, "
    "--repro, -v, --strict, --rtol/--atol, ...): see gradcheck run --help.",
)
def check(
    ctx: typer.Context,
    expr: Annotated[
        str, typer.Argument(help="The expression, as a case file's expr.", metavar="EXPR")
    ],
    inputs: Annotated[
        list[str],
        typer.Option(
            "--input",
            "-i",
            help="NAME=3,4 (a random input of that shape; NAME=3,4:positive for another "
            "init; NAME=() a scalar) or NAME=[[1, 2], [3, 4]] (a literal); repeatable.",
            metavar="NAME=SPEC",
        ),
    ],
    dtype: Annotated[str | None, typer.Option(help="float64 (default), float32, ...")] = None,
    cotangent: Annotated[
        str | None,
        typer.Option(help="random (default: seeded normal, far more sensitive) or ones."),
    ] = None,
    wrt: Annotated[
        list[str] | None,
        typer.Option(help="An input or binding to differentiate; repeatable [default: all]."),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the random inputs.")] = None,
) -> None:
    """Check one expression, given on the command line, as `run` checks a case."""
    data: dict[str, Any] = {"name": CASE_NAME, "expr": expr, "inputs": _inputs(inputs)}
    settings = {"dtype": dtype, "cotangent": cotangent, "wrt": wrt, "seed": seed}
    data.update({key: value for key, value in settings.items() if value is not None})
    run = typer.main.get_command(app).commands["run"]
    # run's own parser reads the rest of the command line, and exits with run's code.
    run.main(list(ctx.args), prog_name=f"{ctx.find_root().info_name} check", obj=_Given(data))


class _Given:
    """The case `run` checks instead of reading case files: built after `run` has loaded
    its --ops files (the expression may use their ops), with its --rtol/--atol."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def collect(self, paths: list | None, *, keyword: str | None, max_elements: int, rtol, atol):
        from ..cases import Collected
        from ..cases.loader import load_case

        if paths:
            raise UsageError(f"check takes no case files (got {paths[0]}); use gradcheck run")
        data = dict(self.data)
        tolerance = {key: v for key, v in (("rtol", rtol), ("atol", atol)) if v is not None}
        if tolerance:
            data["tolerance"] = tolerance
        if keyword:
            raise UsageError("check has one case: -k has nothing to select")
        item = load_case(data, file=FILE, max_elements=max_elements)
        return Collected([item], [], 0)


def _integers(spec: str, numbers: str) -> Any:
    """An integer input's numbers: `0,2,2` (a list), `3` (a scalar) or a YAML literal,
    read by the case files' bounded reader as every `-i` literal is."""
    from ..cases.reading import check_read, read_yaml

    text = numbers.strip()
    try:
        value = read_yaml(text if text.startswith("[") or "," not in text else f"[{text}]")
        check_read(value)
    except CaseFileError as e:
        shown = spec if len(spec) <= 60 else spec[:60] + "..."
        raise typer.BadParameter(
            f"{shown!r}: not a list of integers ({e})", param_hint="-i"
        ) from None
    return value


def _inputs(specs: list[str]) -> dict[str, Any]:
    """`-i NAME=SPEC` options as a case file's `inputs:` mapping."""
    from ..cases.reading import check_read, read_yaml

    inputs: dict[str, Any] = {}
    for spec in specs:
        name, equals, value = spec.partition("=")
        name, value = name.strip(), value.strip()
        if not (equals and name and value):
            raise typer.BadParameter(
                f"{spec!r}: write NAME=SIZES (x=3,4) or NAME=LITERAL (x=[1.0, 2.0])",
                param_hint="-i",
            )
        if name in inputs:
            raise typer.BadParameter(f"input {name!r} is given twice", param_hint="-i")
        dtype, colon, numbers = value.partition(":")
        if colon and dtype.strip() in INTEGER_DTYPES:  # i=int64:0,2,2 (an integer input)
            inputs[name] = {"values": _integers(spec, numbers), "dtype": dtype.strip()}
            continue
        sizes = _SIZES.fullmatch(value.replace(" ", ""))
        if sizes:
            shape = value.split(":")[0].replace(" ", "")
            random: dict[str, Any] = {
                "shape": [] if shape == "()" else list(map(int, shape.split(",")))
            }
            if sizes[1]:
                random["init"] = sizes[1]
            inputs[name] = random
            continue
        try:  # the case files' bounded reader: no alias bomb, no deep nesting, plain data
            inputs[name] = read_yaml(value)
            check_read(inputs[name])
        except CaseFileError as e:
            shown = spec if len(spec) <= 60 else spec[:60] + "..."
            raise typer.BadParameter(f"{shown!r}: not a literal ({e})", param_hint="-i") from None
    return inputs
