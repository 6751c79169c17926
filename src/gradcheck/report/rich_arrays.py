"""A failing case's numbers in the rich report: the input table, then the arrays to read.

The arrays are laid out as blocks (reference, engine, their difference) side by side
when their rows fit the width, else as many per row as fit, one under the other; a
row of numbers is never wrapped. An array too wide for the width, or (with `-v`) too
large to read whole, is summarised as NumPy does (``...`` for the middle elements).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from ..results import CaseResult, Comparison
from .text import printable

STATUS_STYLE = {"passed": "green", "failed": "bold red"}
# A failing input's arrays are shown without -v when they are this small: seeing the
# wrong numbers next to the right ones is often the whole story.
FAILING_ARRAY_LIMIT = 27
# With -v, larger arrays are summarised to their first and last few elements per axis.
ARRAY_PRINT_LIMIT = 64
GAP = 2  # blanks between blocks


def comparison_rows(case: CaseResult, verbose: bool) -> list[tuple[str, Comparison]]:
    """The table's rows: the forward value first when it failed, then failing inputs
    (every input, with `verbose`)."""
    rows: list[tuple[str, Comparison]] = []
    # A wrong forward value makes every gradient suspect, so it leads the table.
    if case.forward is not None and (verbose or not case.forward.passed):
        rows.append(("(forward)", case.forward))
    rows += [
        (name, i.comparison)
        for name, i in case.labelled_inputs()
        if verbose or not i.comparison.passed
    ]
    return rows


def comparisons(case: CaseResult, verbose: bool, width: int) -> Iterator[RenderableType]:
    """The input table, forward mode's consistency with reverse mode where it was checked,
    then the arrays of the rows small enough to read (all with -v)."""
    rows = comparison_rows(case, verbose)
    if rows:
        yield comparison_table(rows)
    for i in case.jvp:
        c = i.consistency
        if c is not None and (verbose or not c.passed):
            line = Text(f"{i.name}: forward vs reverse mode: <vjp(u), t> = {c.vjp_dot:.6g}, ")
            line.append(f"<u, jvp(t)> = {c.jvp_dot:.6g} (bound {c.bound:.2g}) ")
            line.append(c.status, style=STATUS_STYLE.get(c.status, ""))
            yield line
    for name, comparison in rows:
        if verbose or (not comparison.passed and comparison.size <= FAILING_ARRAY_LIMIT):
            yield arrays(name, comparison, width)


def comparison_table(rows: list[tuple[str, Comparison]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("input", no_wrap=True)  # a name (a module's fc1_weight) is never cut
    table.add_column("ref shape", overflow="fold")
    table.add_column("engine shape", overflow="fold")
    table.add_column("max abs", justify="right", no_wrap=True)
    table.add_column("max rel", justify="right", no_wrap=True)
    table.add_column("mismatched", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for name, c in rows:
        shape_style = "" if c.reference_shape == c.engine_shape else "bold red"
        table.add_row(
            Text(printable(name), style="bold"),
            Text(shape_text(c.reference_shape)),
            Text(shape_text(c.engine_shape), style=shape_style),
            Text(_number(c.max_abs_diff)),
            Text(_number(c.max_rel_diff)),
            Text(f"{c.mismatched}/{c.size}"),
            Text(c.status, style=STATUS_STYLE.get(c.status, "")),
        )
    return table


def shape_text(shape: tuple[int, ...]) -> str:
    return "scalar" if len(shape) == 0 else str(tuple(shape))


def _number(value: float | None) -> str:
    # None: no meaningful value (e.g. shapes differ); NaN/inf print as numpy does.
    return "-" if value is None else f"{value:.3g}"


def arrays(name: str, comparison: Comparison, width: int) -> Text:
    """Reference, engine and difference, laid out in blocks that fit `width`."""
    reference, engine = comparison.reference, comparison.engine
    out = Text.assemble((printable(name), "bold"), " arrays")
    if comparison.worst_index is not None:
        out.append(f", worst at index {tuple(comparison.worst_index)}", style="dim")
    if reference is None or engine is None:
        return out.append(": not recorded", style="dim")
    reference, engine = np.asarray(reference), np.asarray(engine)
    blocks = {"reference": reference, "engine": engine}
    if reference.shape == engine.shape:
        # inf - inf is NaN, which is exactly what the difference should show there.
        with np.errstate(invalid="ignore", over="ignore"):
            blocks["engine - reference"] = np.subtract(
                np.asarray(engine, np.float64), np.asarray(reference, np.float64)
            )
    laid = [
        (heading, _array_lines(a, width, small=heading != "engine - reference"))
        for heading, a in blocks.items()
    ]
    for row in _pack(laid, width):
        out.append("\n")
        out.append(_side_by_side([heading for heading, _ in row], row), "dim")
        height = max(len(lines) for _, lines in row)
        body = [(h, lines + [""] * (height - len(lines))) for h, lines in row]
        for i in range(height):
            out.append("\n" + _side_by_side([lines[i] for _, lines in body], row))
    return out


def _block_width(block: tuple[str, list[str]]) -> int:
    heading, lines = block
    return max(len(heading), *map(len, lines))


def _pack(blocks: list[tuple[str, list[str]]], width: int) -> list[list[tuple[str, list[str]]]]:
    """The blocks in rows, as many side by side as fit `width`, in order."""
    rows: list[list[tuple[str, list[str]]]] = []
    used = width + 1
    for block in blocks:
        needed = _block_width(block)
        if rows and used + GAP + needed <= width:
            rows[-1].append(block)
            used += GAP + needed
        else:
            rows.append([block])
            used = needed
    return rows


def _side_by_side(cells: list[str], row: list[tuple[str, list[str]]]) -> str:
    widths = [_block_width(block) for block in row]
    line = (" " * GAP).join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True))
    return line.rstrip()


def _array_lines(array: np.ndarray, width: int, *, small: bool = True) -> list[str]:
    """The array as NumPy prints it, each row on one line no wider than `width` when
    summarising can make it so. `small=False` for differences: a difference of 1e-7
    must not print as `0.`."""
    array = np.asarray(array, np.float64)  # bfloat16 prints as NumPy floats do
    options = {"precision": 4, "suppress_small": small, "max_line_width": 10**6}
    text = np.array2string(array, threshold=ARRAY_PRINT_LIMIT, **options)
    for edge in (3, 2, 1):
        if _widest(text) <= width:
            return text.splitlines()
        text = np.array2string(array, threshold=0, edgeitems=edge, **options)
    if _widest(text) > width:  # one element per row is still too wide: let NumPy wrap
        text = np.array2string(
            array, threshold=0, edgeitems=1, **{**options, "max_line_width": width}
        )
    return text.splitlines()


def _widest(text: str) -> int:
    return max(map(len, text.splitlines()))
