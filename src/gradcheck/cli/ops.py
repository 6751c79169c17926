"""`gradcheck ops`, `faults` and `schema`: what the registry, the catalogue and the case
format hold.
"""

import enum
import json
import re
from typing import Annotated

import typer

from ..errors import GradcheckError
from .common import (
    EngineOption,
    OpsFiles,
    app,
    boundary,
    engine_factory,
    load_ops,
    load_user_ops,
    run_settings,
    stdout_console,
)

# Stacked, the columns beside the rules (operator, engine, their gaps) and the rules' indent.
BESIDE_RULES = 20


class Spelling(str, enum.Enum):
    numpy = "numpy"
    tensorflow = "tensorflow"
    torch = "torch"
    jax = "jax"


@app.command()
@boundary
def ops(
    ops_files: OpsFiles = None,
    rules: Annotated[bool, typer.Option("--rules", help="Add each op's VJP rules.")] = False,
    spelling: Annotated[
        Spelling | None,
        typer.Option(
            help="The VJP rules in NumPy, TensorFlow, PyTorch or JAX spelling (implies --rules)."
        ),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Markdown tables (docs/ops.md), every spelling.")
    ] = False,
    engine: EngineOption = None,
    forward: Annotated[
        bool,
        typer.Option("--forward", help="The JVP rules (forward mode) instead (implies --rules)."),
    ] = False,
) -> None:
    """Every op an expression may use, with its TensorFlow mapping.

    Each op's signature, TensorFlow mapping and meaning, and (--rules) its VJP rules
    (--forward: its JVP rules). With an engine (--engine, or the config file's), also
    which ops it implements and which it lacks: the engine is imported and made, no case
    is run. The config file's ops files are loaded unless --ops is given.
    """
    from rich.text import Text

    from ..config import DEFAULT
    from ..report.text import written_whole

    settings = run_settings({"engine": engine, "ops": ops_files})
    load_ops(list(settings.ops))
    if markdown:
        typer.echo(_ops_markdown(), nl=False)
        return
    found = _coverage(settings) if settings.source("engine") != DEFAULT else None
    spell = (spelling or Spelling.numpy).value if rules or spelling or forward else None
    mode = "fwd" if forward else "rev"
    console = stdout_console()
    # Side by side where it fits; else stacked; else stacked with long rule words broken.
    for layout in (
        {"stacked": False},
        {"stacked": True},
        {"stacked": True, "width": console.width},
    ):
        table = _ops_table(found, spell, mode, **layout)
        if _narrowest(console, table) <= console.width:
            break
    with written_whole(console):
        console.print(table)
    if found:
        console.print(Text(_coverage_line(settings.engine, found)))


def _ops_table(found, spell: str | None, mode: str, *, stacked: bool, width: int | None = None):
    """The ops, a row each. Signatures, TensorFlow names and rules are copied into code:
    never cut, only wrapped at words. Side by side, or where that cannot fit (`stacked`,
    80 columns) the TensorFlow name and the meaning or the rules under the signature;
    `width`: rule words too long for it broken after a `(` or `,`, never inside a name."""
    from rich.table import Table
    from rich.text import Text

    from ..ops import all_ops

    table = Table(box=None, pad_edge=False)
    heading = "TensorFlow" if spell else "TensorFlow, meaning"
    table.add_column(f"op, {heading}" if stacked else "op", overflow="fold", min_width=24)
    table.add_column("operator", no_wrap=True)
    if not stacked:  # the meaning goes under the TensorFlow name
        table.add_column(heading, overflow="fold", min_width=24)
    if found:
        table.add_column("engine", no_wrap=True)
    if spell and not stacked:
        table.add_column(f"{'JVP' if mode == 'fwd' else 'VJP'} ({spell})", overflow="fold")
    for op in all_ops():
        operator = {"u-": "-x"}.get(op.operator or "", op.operator or "")
        # Text, not markup: `concat([values, ...], axis=0)` would lose its `[values, ...]`.
        tf_name = op.tf_name or "none: --reference numeric"
        doc = f"{op.doc} [user op, {op.origin}]" if op.origin else op.doc
        lines = _rule_lines(op, spell, mode) if spell else []
        if width is not None:
            lines = [_breakable(line, width - BESIDE_RULES) for line in lines]
        # With the rules beside it, the meaning would interleave with their lines.
        below = Text(tf_name) if spell else Text.assemble(tf_name, "\n", (doc, "dim"))
        if stacked:
            rules = "".join(f"\n  {line}" for line in lines)
            cells = [Text.assemble(op.signature, "\n", below, rules), Text(operator)]
        else:
            cells = [Text(op.signature), Text(operator), below]
        if found:
            cells.append(Text(_has(found, op.name)))
        if spell and not stacked:
            cells.append(Text("\n".join(lines)))
        table.add_row(*cells)
    return table


def _narrowest(console, table) -> int:
    """The fewest columns `table` fits in with no word cut."""
    return console.measure(table, options=console.options.update_width(10**6)).minimum


def _breakable(line: str, width: int) -> str:
    """`line` with each word longer than `width` broken onto further lines after a `(` or
    a `,` (an indented continuation), so that no name is cut."""
    words = []
    for word in line.split(" "):
        pieces = re.findall(r"[^(,]*[(,]?", word)[:-1] or [word]
        out = ""
        for piece in pieces:
            if out and len(out.rsplit("\n", 1)[-1]) + len(piece) > width:
                out += "\n    "
            out += piece
        words.append(out)
    return " ".join(words)


def _coverage(settings):
    from ..diagnosis.run.report_card import coverage
    from ..engines.driver import EngineFailure, call_engine
    from ..ops import all_ops

    factory = engine_factory(settings)
    try:
        instance = call_engine("creating the engine", factory)
    except EngineFailure as e:
        raise GradcheckError(f"{settings.engine_named()}: {e.message}") from None
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
        parts.append(f"and no working {', '.join(found.protocol)} yet (every adapter needs them)")
    return "; ".join(parts)


def _rule_lines(op, spelling: str, mode: str = "rev") -> list[str]:
    """`param: rule` per VJP (`mode` "fwd": per JVP) of `op`, as its declaration writes them."""
    if op.rule(0, spelling, mode) is None:
        return []
    params = [f"{op.params[0]}[i]"] if op.variadic else list(op.params)
    return [f"{p}: {op.rule(i, spelling, mode)}" for i, p in enumerate(params)]


def _ops_markdown() -> str:
    """docs/ops.md: the op registry as a page (a test keeps the file equal to this)."""
    from ..ops import all_ops

    lines = [
        "# Ops and their VJP and JVP rules",
        "",
        "Generated by `gradcheck ops --markdown` from the op registry "
        "(`src/gradcheck/ops/`); do not edit by hand.",
        "",
        "In the rules `g` is the cotangent, `t` the argument's tangent (forward mode), `y`",
        "the op's output; for reductions `axis` is the tuple of reduced axes, `kept_shape`",
        "x's shape with them as size 1 and `n` the number of elements each output",
        "summarises. Elementwise VJPs give the broadcast shape, which is then summed back to",
        "each argument's shape (unbroadcast); a JVP may give the argument's shape, which is",
        "then broadcast to the output's. For tensordot `axes_a`/`axes_b` are the contracted",
        "axes of a and of b, pairwise, `free_a`/`free_b` the others; for einsum `adjoint` is",
        "operand i's VJP as an equation, `others` the other operands and `fill` the identity",
        "matrices (a repeated index) and ones (an index only operand i has) it needs.",
        "",
        "| op | TensorFlow | meaning | VJP (NumPy) | VJP (TensorFlow) | JVP (NumPy) "
        "| JVP (TensorFlow) |",
        "|---|---|---|---|---|---|---|",
    ]
    for op in all_ops():
        cells = (f"`{op.signature}`", f"`{op.tf_name or 'none'}`", op.doc)
        lines.append(_markdown_row(op, cells, ("numpy", "tensorflow")))
    lines += [
        "",
        "## In PyTorch and JAX spelling",
        "",
        "The same rules as the fixes state them for the stock torch and jax adapters (and",
        "an engine built on them). A builtin op that declares none has its NumPy text",
        "translated (`np.` to `torch.` or `jnp.`, torch's `dim=` and `keepdim=`); the tests",
        "evaluate every text with real tensors of that library. An op loaded with `--ops` has",
        "only the texts its declaration gives: where a cell is empty, the fix states the NumPy",
        "rule alone. The convolutions' and pools' texts name their windows as the libraries",
        "take them: `stride`, `dilation` and `ksize` one per spatial axis (the pools' `strides`",
        "too), `pads` a (before, after) pair per spatial axis (`pad_width`: per axis of x),",
        "`torch_pads` F.pad's (last axis first), `channels` x's channel axis, `filter_axes` w's",
        "output and input channel axes, `output_padding` F.conv_transpose2d's and",
        "`window_dimensions`/`window_strides` lax.reduce_window's.",
        "",
        "| op | VJP (PyTorch) | VJP (JAX) | JVP (PyTorch) | JVP (JAX) |",
        "|---|---|---|---|---|",
    ]
    for op in all_ops():
        lines.append(_markdown_row(op, (f"`{op.signature}`",), ("torch", "jax")))
    return "\n".join(lines) + "\n"


def _markdown_row(op, cells: tuple[str, ...], spellings: tuple[str, ...]) -> str:
    """A table row: `cells`, then `op`'s VJP rules and JVP rules in each of `spellings`."""
    rules = [
        "<br>".join(f"`{line}`" for line in _rule_lines(op, spelling, mode))
        for mode in ("rev", "fwd")
        for spelling in spellings
    ]
    return "| " + " | ".join(c.replace("|", "\\|") for c in (*cells, *rules)) + " |"


@app.command()
@boundary
def faults() -> None:
    """The known autodiff bugs the diagnosis fingerprints."""
    from rich.markup import escape
    from rich.table import Table

    from ..diagnosis.faults.catalogue import CATALOGUE

    table = Table(box=None, pad_edge=False, show_lines=False)
    table.add_column("fault")
    table.add_column("the bug, and its fix")
    for fault in CATALOGUE:
        seen = f"\n[dim]seen: {escape(fault.seen)}[/dim]" if fault.seen else ""
        table.add_row(
            fault.code, f"{escape(fault.summary)}.\n[dim]fix: {escape(fault.fix)}[/dim]{seen}"
        )
    stdout_console().print(table)


@app.command()
@boundary
def schema(ops_files: OpsFiles = None) -> None:
    """The JSON Schema of case files, for editors and validators.

    JSON Schema draft 2020-12.
    """
    from ..cases import case_file_schema

    load_user_ops(ops_files)
    typer.echo(json.dumps(case_file_schema(), indent=2))
