"""Heatmaps of a gradient against its reference: three inline SVGs on one colour scale.

The reference, the engine's array and their difference (engine - reference) share one
diverging scale, symmetric about 0, so a colour means the same number in every panel.
The palette is ColorBrewer's RdBu (colour-blind safe); because any diverging palette
loses its sign in grey, negative cells are also hatched, and the mismatched region
(outside the case's tolerance) is outlined black on white, which prints in grey too.
What is drawn of a large or high-rank array is `heatmap_slices`' choice.

A cell of the difference panel has a title (shown on hover) with its index and all
three values: one title per cell, not three, as titles are most of a large page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cases.model import Tolerance
from ..comparison.compare import close_mask
from ..results import Comparison
from .heatmap_slices import Slice, index_text, notes, slices
from .markup import shape, text

PANEL_PX = 160  # a slice's longer side, in pixels, give or take the cell rounding
CELL_PX = (4, 36)  # the smallest and largest cell
LABEL_PX = 28  # cells at least this large print their value
GRID_PX = 12  # cells at least this large are parted by thin white lines
GAP = 14  # between slices, room for a slice's label

# ColorBrewer RdBu, 11 classes, from -1 (blue) through 0 (white) to +1 (red).
PALETTE = np.array(
    [
        (0x05, 0x30, 0x61), (0x21, 0x66, 0xAC), (0x43, 0x93, 0xC3), (0x92, 0xC5, 0xDE),
        (0xD1, 0xE5, 0xF0), (0xF7, 0xF7, 0xF7), (0xFD, 0xDB, 0xC7), (0xF4, 0xA5, 0x82),
        (0xD6, 0x60, 0x4D), (0xB2, 0x18, 0x2B), (0x67, 0x00, 0x1F),
    ],
    dtype=float,
)  # fmt: skip
DIFFERENCE = "engine − reference"


def colours(values: np.ndarray, scale: float) -> list[str]:
    """Hex colours of `values` on the scale from -scale to +scale; NaN gets a pattern."""
    with np.errstate(invalid="ignore"):
        t = (np.clip(values / scale, -1.0, 1.0) + 1.0) / 2.0 * (len(PALETTE) - 1)
    t = np.nan_to_num(t, nan=0.0).reshape(-1)
    low = np.minimum(t.astype(int), len(PALETTE) - 2)
    frac = (t - low)[:, None]
    rgb = np.rint(PALETTE[low] * (1 - frac) + PALETTE[low + 1] * frac).astype(int)
    out = [f"#{v:06x}" for v in (rgb @ [1 << 16, 1 << 8, 1]).tolist()]
    for i in np.flatnonzero(np.isnan(values)):
        out[i] = "url(#gc-nan)"
    return out


# Patterns and the legend's gradient, defined once per page; heatmaps refer to them.
HEATMAP_DEFS = (
    # Black and white lines: the hatching shows on light and on dark cells alike.
    '<pattern id="gc-hatch" width="6" height="6" patternUnits="userSpaceOnUse">'
    '<path d="M0 6L6 0" stroke="#000" stroke-opacity=".5" stroke-width=".8"/>'
    '<path d="M0 3L3 0M3 6L6 3" stroke="#fff" stroke-opacity=".7" stroke-width=".8"/>'
    "</pattern>"
    '<pattern id="gc-nan" width="6" height="6" patternUnits="userSpaceOnUse">'
    '<rect width="6" height="6" fill="#bbb"/>'
    '<path d="M0 0L6 6M6 0L0 6" stroke="#000" stroke-width=".8"/></pattern>'
    '<linearGradient id="gc-scale">'
    + "".join(
        f'<stop offset="{i / (len(PALETTE) - 1):.2f}" stop-color="{colour}"/>'
        for i, colour in enumerate(colours(np.linspace(-1.0, 1.0, len(PALETTE)), 1.0))
    )
    + "</linearGradient>"
)


def heatmaps(name: str, comparison: Comparison) -> str:
    """The figure for one input: its panels, their legend, and notes on what is shown."""
    if comparison.reference is None or comparison.engine is None:
        return f'<p class="note">{text(name)}: the arrays were not recorded.</p>'
    reference = np.asarray(comparison.reference, dtype=np.float64)
    engine = np.asarray(comparison.engine, dtype=np.float64)
    if not (reference.size and engine.size):
        return f'<p class="note">{text(name)}: an empty array, nothing to draw.</p>'
    if reference.shape != engine.shape:
        drawn = [slices(a, [a], None) for a in (reference, engine)]
        scale = _scale([v for one in drawn for s in one for v in s.values])
        panels = [
            _panel(name, title, one, _layout(one), 0, scale, tips=(title,))
            for title, one in zip(("reference", "engine"), drawn, strict=True)
        ]
        said = [
            f"The shapes differ ({shape(reference.shape)} against {shape(engine.shape)}), "
            "so there is no difference to draw; each array is drawn on its own shape."
        ]
        return _figure(name, panels, scale, comparison, said + notes(drawn[0], reference.shape))
    with np.errstate(invalid="ignore", over="ignore"):
        difference = engine - reference
    bad = ~close_mask(reference, engine, _tolerance(comparison))
    drawn = slices(difference, [reference, engine, difference], bad)
    scale = _scale([v for s in drawn for v in s.values])
    titles = ("reference", "engine", DIFFERENCE)
    layout = _layout(drawn)
    panels = [
        _panel(name, title, drawn, layout, i, scale, tips=titles if title == DIFFERENCE else ())
        for i, title in enumerate(titles)
    ]
    return _figure(name, panels, scale, comparison, notes(drawn, reference.shape))


def _tolerance(comparison: Comparison) -> Tolerance:
    # A comparison made before tolerances were recorded: exact equality marks mismatches.
    return Tolerance(comparison.rtol or 0.0, comparison.atol or 0.0)


def _scale(arrays: list[np.ndarray]) -> float:
    """The largest finite magnitude drawn: the scale runs from -scale to +scale."""
    finite = [np.abs(a[np.isfinite(a)]) for a in arrays]
    return max((float(f.max()) for f in finite if f.size), default=0.0) or 1.0


# --- one panel ------------------------------------------------------------------------


@dataclass
class _Cells:
    """Where a slice's cells sit, the same in every panel of a figure."""

    px: int
    top: int
    at: list[tuple[int, int]]  # each cell's top-left corner, row by row
    outline: str  # the path around the mismatched region


def _layout(drawn: list[Slice]) -> list[_Cells]:
    """The slices stacked, each with its label above it."""
    rows, cols = drawn[0].bad.shape
    low, high = CELL_PX
    px = max(low, min(high, PANEL_PX // max(rows, cols)))
    step = rows * px + (2 * GAP if drawn[0].label else GAP)
    row, col = np.divmod(np.arange(rows * cols), cols)
    corners = list(zip((col * px).tolist(), (row * px).tolist(), strict=True))
    out = []
    for n, s in enumerate(drawn):
        top = n * step + (GAP if s.label else 0)
        at = [(x, top + y) for x, y in corners]
        out.append(_Cells(px, top, at, _outline(s.bad > 0, px, at)))
    return out


def _panel(
    name: str,
    title: str,
    drawn: list[Slice],
    layout: list[_Cells],
    panel: int,
    scale: float,
    *,
    tips: tuple[str, ...],
) -> str:
    """Panel `panel` of the slices as one SVG; cells titled when `tips` names the panels
    whose values a title lists."""
    fills = colours(np.stack([s.values[panel] for s in drawn]), scale)
    size = drawn[0].bad.size
    body = []
    for n, (s, cells) in enumerate(zip(drawn, layout, strict=True)):
        if s.label:
            label = text(name + s.label)
            body.append(f'<text class="slice" x="0" y="{cells.top - 4}">{label}</text>')
        body.append(
            _cells(s, panel, cells, fills[n * size : (n + 1) * size], scale,
                   _tips(name, s, tips) if tips else [])
        )  # fmt: skip
    last = layout[-1]
    width = drawn[0].bad.shape[1] * last.px + 2
    height = last.top + drawn[0].bad.shape[0] * last.px + 2
    return (
        f'<figure class="panel"><figcaption>{text(title)}</figcaption>'
        f'<svg class="heatmap" data-panel="{text(title)}" width="{width}" height="{height}" '
        f'viewBox="-1 -1 {width} {height}" role="img">'
        f"<title>{text(name)}: {text(title)}</title>{''.join(body)}</svg></figure>"
    )


def _cells(
    s: Slice, panel: int, cells: _Cells, fills: list[str], scale: float, tips: list[str]
) -> str:
    """One slice of one panel: a rect per cell, then hatching, outline and values."""
    px, at, values = cells.px, cells.at, s.values[panel]
    rects = [
        f'<rect x="{x}" y="{y}" width="{px}" height="{px}" fill="{fill}"'
        for (x, y), fill in zip(at, fills, strict=True)
    ]
    if tips:
        rects = [f"{r}><title>{tip}</title></rect>" for r, tip in zip(rects, tips, strict=True)]
    else:
        rects = [r + "/>" for r in rects]
    grid = px >= GRID_PX
    out = ['<g stroke="#fff" stroke-width=".6">' if grid else "", *rects, "</g>" if grid else ""]
    negative = np.flatnonzero(values.reshape(-1) < 0).tolist()
    if negative:
        d = "".join(f"M{at[i][0]} {at[i][1]}h{px}v{px}h-{px}z" for i in negative)
        out.append(f'<path class="neg" d="{d}" fill="url(#gc-hatch)"/>')
    if cells.outline:
        # Black under white: the outline shows on dark and light cells, and in grey.
        d = cells.outline
        out.append(f'<path class="bad" d="{d}" fill="none" stroke="#000" stroke-width="3"/>')
        out.append(f'<path d="{d}" fill="none" stroke="#fff" stroke-width="1"/>')
    if px >= LABEL_PX and s.block == (1, 1):
        out += _labels(values, cells, scale)
    return "".join(out)


def _outline(bad: np.ndarray, px: int, at: list[tuple[int, int]]) -> str:
    """The border of the mismatched region: every edge between a mismatched cell and a
    matched one or the slice's edge, so a wrong block is one outline, a lone element a
    square."""
    if not bad.any():
        return ""
    rows, cols = bad.shape
    padded = np.zeros((rows + 2, cols + 2), dtype=bool)
    padded[1:-1, 1:-1] = bad
    d = []
    for (dr, dc), draw in (((-1, 0), "M{x} {y}h{px}"), ((1, 0), "M{x} {y1}h{px}"),
                           ((0, -1), "M{x} {y}v{px}"), ((0, 1), "M{x1} {y}v{px}")):  # fmt: skip
        neighbour = padded[1 + dr : rows + 1 + dr, 1 + dc : cols + 1 + dc]
        for i in np.flatnonzero(bad & ~neighbour).tolist():
            x, y = at[i]
            d.append(draw.format(x=x, y=y, x1=x + px, y1=y + px, px=px))
    return "".join(d)


def _labels(values: np.ndarray, cells: _Cells, scale: float) -> list[str]:
    """Each value printed in its cell, as large as fits, white on dark cells."""
    out = []
    for (x, y), value in zip(cells.at, values.reshape(-1).tolist(), strict=True):
        label = f"{value:.3g}"
        size = min(cells.px // 3, int(cells.px * 1.6 / len(label)))
        dark = math.isfinite(value) and abs(value) > 0.6 * scale
        fill, halo = ("#fff", "#000") if dark else ("#000", "#fff")  # the halo over hatching
        out.append(
            f'<text class="value" x="{x + cells.px / 2:g}" y="{y + cells.px / 2:g}" '
            f'font-size="{size}" text-anchor="middle" dominant-baseline="central" '
            f'fill="{fill}" stroke="{halo}" stroke-width="1.6" stroke-opacity=".8" '
            f'paint-order="stroke">{label}</text>'
        )
    return out


def _tips(name: str, s: Slice, titles: tuple[str, ...]) -> list[str]:
    """Each cell's hover text: which element (or block), and its value in every panel."""
    words = {DIFFERENCE: "difference"}
    named = text(name)
    at = [named + index_text(i) for i in s.where.reshape(s.bad.size, -1).tolist()]
    columns = [
        [f"{words.get(title, title)} {v:.4g}" for v in values.reshape(-1).tolist()]
        for title, values in zip(titles, s.values, strict=True)
    ]
    counts = s.bad.reshape(-1).tolist()
    if s.block == (1, 1):
        said = [" (mismatched)" if n else "" for n in counts]
    else:
        block = f" (largest |difference| of its {s.block[0]}x{s.block[1]} block"
        said = [f"{block}, {n} mismatched)" if n else f"{block})" for n in counts]
    return [
        f"{where}: {', '.join(cell)}{note}"
        for where, note, *cell in zip(at, said, *columns, strict=True)
    ]


# --- the figure -----------------------------------------------------------------------


def _legend(scale: float) -> str:
    w = 180
    return (
        f'<svg class="legend" width="{w + 60}" height="34" viewBox="-30 0 {w + 60} 34" '
        'role="img"><title>colour scale</title>'
        f'<rect width="{w}" height="12" fill="url(#gc-scale)" stroke="#666" stroke-width=".5"/>'
        f'<rect width="{w // 2}" height="12" fill="url(#gc-hatch)"/>'
        f'<text x="0" y="26" text-anchor="middle">{-scale:.4g}</text>'
        f'<text x="{w // 2}" y="26" text-anchor="middle">0</text>'
        f'<text x="{w}" y="26" text-anchor="middle">{scale:.4g}</text></svg>'
    )


def _figure(
    name: str, panels: list[str], scale: float, comparison: Comparison, said: list[str]
) -> str:
    tolerance = ""
    if comparison.rtol is not None:
        tolerance = f" (outside rtol {comparison.rtol:g}, atol {comparison.atol:g})"
    key = (
        "Blue (hatched) is negative, red positive, white zero; one scale for all panels. "
        f"The mismatched elements are outlined{tolerance}. Hover a cell of the last panel "
        "for its index and values."
    )
    items = "".join(f"<li>{text(note)}</li>" for note in [key, *said])
    return (
        f'<div class="heatmaps" data-input="{text(name)}">'
        f'<div class="panels">{"".join(panels)}</div>'
        f'<div class="key">{_legend(scale)}<ul>{items}</ul></div></div>'
    )
