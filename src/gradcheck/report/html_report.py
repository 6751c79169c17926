"""A report to look at (SPEC §11): one self-contained HTML page per run.

No network, no external file, no script: styles are inline, pictures are inline SVG,
sections collapse with `<details>`. At the top the summary (counts, and the run's root
causes and per-op record when the results carry them); then a section per case that
failed, errored or is invalid, with the top hint, its fix and the other explanations
beside the expression graph and, per failing input, heatmaps of the reference, the
engine's gradient and their difference; then the passing and skipped cases as a list.

Everything from a user or an engine is escaped by `markup.text`.
"""

from __future__ import annotations

from typing import Any

from ..results import CaseResult, Comparison, Hint, RunResult
from .case_source import case_source, read_lines
from .markup import number, shape, text
from .rich_report import STATUS_WORD, headline, summary_line
from .svg_graph import GRAPH_DEFS, expression_graph
from .svg_heatmap import HEATMAP_DEFS, heatmaps

SHOWN = ("failed", "error", "invalid")  # a section each; the rest is a list

STYLE = """
:root{color-scheme:light;--bad:#b2182b;--ok:#1a7f37;--skip:#8a6100;--dim:#57606a}
body{font:15px/1.45 system-ui,sans-serif;margin:1.5rem auto;max-width:1400px;padding:0 1rem;
color:#1f2328;background:#fff}
code,pre,.graph text{font-family:ui-monospace,Menlo,Consolas,monospace}
h1{font-size:1.5rem;margin:0 0 .3rem}h2{font-size:1.1rem;display:inline;margin:0}
h3{font-size:1rem;margin:1rem 0 .4rem}
.meta,.note,.dim{color:var(--dim)}.note{font-size:.9rem}
.counts{display:flex;gap:1.2rem;flex-wrap:wrap;font-size:1.05rem;margin:.6rem 0}
.counts b{font-size:1.4rem}
.status{font-weight:700;letter-spacing:.03em}
.failed .status,.error .status,.invalid .status{color:var(--bad)}
.passed .status{color:var(--ok)}.skipped .status{color:var(--skip)}
section.case{border:1px solid #d0d7de;border-left:6px solid var(--bad);border-radius:6px;
margin:1.2rem 0;padding:.6rem 1rem}
summary{cursor:pointer}
.body{display:grid;grid-template-columns:minmax(18rem,34rem) minmax(0,1fr);gap:1.5rem;
margin-top:.6rem}.explain{min-width:0;overflow-x:auto}
.hint{border:2px solid #1f2328;border-radius:6px;padding:.5rem .8rem;margin:.5rem 0}
.hint .code{font-weight:700}.fix{margin:.3rem 0 0}.fix::before{content:"fix: ";font-weight:700}
ul.hints{padding-left:1.1rem}ul.hints li{margin:.3rem 0}
table{border-collapse:collapse;font-size:.85rem}
td,th{padding:.1rem .35rem;text-align:left;white-space:nowrap}
th{border-bottom:1px solid #1f2328}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.5rem;overflow-x:auto;font-size:.85rem}
pre .ln{color:var(--dim);user-select:none;display:inline-block;min-width:3ch;text-align:right;
margin-right:1ch}pre .at{color:var(--bad)}
.panels{display:flex;flex-wrap:wrap;gap:1rem;align-items:flex-start}
figure.panel{margin:0}figcaption{font-size:.85rem;font-weight:600}
.heatmap text{font-family:ui-monospace,monospace}.heatmap .slice{font-size:10px}
.key{display:flex;gap:1rem;align-items:flex-start;font-size:.85rem}.key ul{margin:0}
.legend{flex:none}.legend text{font:10px ui-monospace,monospace}
.graph text{text-anchor:middle;fill:#1f2328}
.graph .edge{fill:none;stroke:#57606a;stroke-width:1.3}
.graph .node rect{fill:#fff;stroke:#57606a;stroke-width:1.2}
.graph .input rect{fill:#f6f8fa}.graph .literal rect{stroke-dasharray:2 2}
.graph .output rect{stroke:#1f2328;stroke-width:2}
.graph .failing rect{stroke:var(--bad);stroke-width:2.5;stroke-dasharray:6 3}
.graph .failing text{fill:var(--bad)}
.graph .highlighted rect{fill:#ffe9a8;stroke:#1f2328;stroke-width:4;stroke-dasharray:none}
ul.compact{columns:2 32rem;font-size:.9rem;padding-left:1.1rem}
svg.defs{position:absolute}
@media (max-width:900px){.body{display:block}}
@media print{body{margin:0;max-width:none}.body{display:block}section.case{break-inside:auto}
pre{white-space:pre-wrap}svg{print-color-adjust:exact}}
"""


def to_html(run: RunResult, *, tool_version: str) -> str:
    """The whole run as one HTML document (UTF-8 text)."""
    shown = [case for case in run.cases if case.status in SHOWN]
    listed = [case for case in run.cases if case.status not in SHOWN]
    files = {case.file: read_lines(case.file) for case in shown}  # each read once
    title = f"gradcheck: {summary_line(run)}"
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width,initial-scale=1">',
            f"<title>{text(title)}</title><style>{STYLE}</style></head><body>",
            '<svg class="defs" width="0" height="0" aria-hidden="true">',
            f"<defs>{HEATMAP_DEFS}{GRAPH_DEFS}</defs></svg>",
            _summary(run, tool_version, shown),
            *(_case(case, n, files[case.file]) for n, case in enumerate(shown, 1)),
            _listed(listed),
            "</body></html>\n",
        ]
    )


# --- the summary ----------------------------------------------------------------------


def _summary(run: RunResult, tool_version: str, shown: list[CaseResult]) -> str:
    summary = run.summary
    counts = "".join(
        f'<span class="{status}"><b>{summary[status]}</b> '
        f'<span class="status">{status}</span></span>'
        for status in ("failed", "error", "invalid", "passed", "skipped")
    )
    contents = "".join(
        f'<li class="{case.status}"><a href="#case-{n}"><span class="status">'
        f"{STATUS_WORD[case.status]}</span> {text(_case_id(case))}</a>"
        f" — {text(headline(case))}</li>"
        for n, case in enumerate(shown, 1)
    )
    return (
        f'<header id="summary"><h1>gradcheck report</h1>'
        f'<p class="meta">engine {text(run.engine)}, reference {text(run.reference)}, '
        f"gradcheck {text(tool_version)}, {summary['duration_s']:.2f}s</p>"
        f'<div class="counts">{counts}</div>'
        f"{_root_causes(summary.get('root_causes'))}{_ops(summary.get('ops'))}"
        + (f'<ol class="contents">{contents}</ol>' if contents else "")
        + "</header>"
    )


def _root_causes(causes: list[dict[str, Any]] | None) -> str:
    """SPEC §6.2's `summary.root_causes`: failing cases grouped by their one explanation,
    and the case that decided it over each rival."""
    if not causes:
        return ""
    items = []
    for cause in causes:
        hint = _hint_dict(cause["hint"])
        cases = cause.get("cases", [])
        mechanism = f" ({hint['mechanism']})" if hint.get("mechanism") else ""
        rivals = "".join(
            f'<p class="dim">decided by {text(r["ruled_out_by"])}, which {text(r["label"])} '
            "does not explain</p>"
            if r.get("ruled_out_by")
            else f'<p class="dim">or {text(r["label"])}: no case of the run tells them apart</p>'
            for r in cause.get("rivals", [])
        )
        items.append(
            f'<li><span class="code">{text(hint.get("code", ""))}</span>{text(mechanism)}: '
            f"{len(cases)} case{'s' if len(cases) != 1 else ''} "
            f"({text(', '.join(cases))})<br>{text(hint.get('message', ''))}"
            + (f'<p class="fix">{text(hint["fix"])}</p>' if hint.get("fix") else "")
            + rivals
            + "</li>"
        )
    return f'<h3>Root causes</h3><ul class="hints root-causes">{"".join(items)}</ul>'


def _hint_dict(hint: Hint | dict[str, Any]) -> dict[str, Any]:
    return hint.to_dict() if isinstance(hint, Hint) else dict(hint)


OP_COLUMNS = {"passed": "passed", "failed": "failed", "failed_elsewhere": "failed elsewhere",
              "unsupported": "unsupported"}  # fmt: skip


def _ops(ops: dict[str, dict[str, Any]] | None) -> str:
    """SPEC §6.2's `summary.ops`: how each op fared over the run (the report card)."""
    if not ops:
        return ""
    columns = [c for c in OP_COLUMNS if any(c in record for record in ops.values())]
    head = "".join(f"<th>{text(c)}</th>" for c in ["op", *(OP_COLUMNS[c] for c in columns)])
    head += "<th>found wrong</th>"
    rows = "".join(
        f"<tr><td><code>{text(op)}</code></td>"
        + "".join(f'<td class="num">{text(record.get(c, 0))}</td>' for c in columns)
        + f"<td>{text(_found(record.get('mechanisms') or {}))}</td></tr>"
        for op, record in ops.items()
    )
    return f'<h3>Ops over the run</h3><table class="ops"><tr>{head}</tr>{rows}</table>'


def _found(mechanisms: dict[str, int]) -> str:
    return ", ".join(f"{m} ({n} case{'s' if n > 1 else ''})" for m, n in mechanisms.items())


# --- one case -------------------------------------------------------------------------


def _case_id(case: CaseResult) -> str:
    return f"{case.location}::{case.name}"


def _case(case: CaseResult, number: int, file_lines: list[str] | None) -> str:
    head = (
        f'<summary><h2><span class="status">{STATUS_WORD[case.status]}</span> '
        f"<code>{text(_case_id(case))}</code></h2> "
        f'<span class="dim">{case.duration_s:.2f}s</span></summary>'
    )
    expr = f"<p>expr <code>{text(case.expr)}</code></p>" if case.expr else ""
    message = f'<p class="message">{text(case.message)}</p>' if case.message else ""
    explain = _hint_blocks(case) + _comparison_table(case) + _traceback(case)
    explain += _source(case, file_lines)
    graph = expression_graph(case)
    pictures = (f"<h3>The expression</h3>{graph}" if graph else "") + _failing_inputs(case)
    return (
        f'<section class="case {case.status}" id="case-{number}"><details open>{head}'
        f'{expr}{message}<div class="body"><div class="explain">{explain}</div>'
        f'<div class="pictures">{pictures}</div></div></details></section>'
    )


def _hint_blocks(case: CaseResult) -> str:
    """The top hint in full, the others compactly, then hints only an input has."""
    if not case.hints:
        return ""
    top, *others = case.hints
    out = [
        f'<div class="hint top"><span class="code">{text(top.code)}</span> '
        f'<span class="dim">({text(top.confidence)})</span><br>{text(top.message)}'
        + (f"<p>mechanism <code>{text(top.mechanism)}</code>" if top.mechanism else "")
        + (f" where <code>{text(top.region)}</code>" if top.region else "")
        + ("</p>" if top.mechanism else "")
        + _rules(top)
        + f'<p class="fix">{text(top.fix)}</p>'
        + (f"<p>node <code>{text(top.node)}</code></p>" if top.node else "")
        + (f'<p class="dim">also seen as {text(_also(top))}</p>' if top.also else "")
        + "</div>"
    ]
    if others:
        out.append(f"<h3>Other explanations</h3>{_hint_list(others)}")
    folded = [*case.hints, *top.also]
    for name, result in case.labelled_inputs():
        extra = [hint for hint in result.hints if hint not in folded]
        if extra:
            out.append(f"<h3>Input {text(name)}</h3>{_hint_list(extra)}")
    return "".join(out)


def _rules(hint: Hint) -> str:
    """A recovered formula: the rule the engine computes beside the right one."""
    if not hint.got_rule:
        return ""
    right = f"; right: <code>{text(hint.want_rule)}</code>" if hint.want_rule else ""
    return f'<p class="rules">computes <code>{text(hint.got_rule)}</code>{right}</p>'


def _also(top: Hint) -> str:
    return "; ".join(h.code + (f" ({h.node})" if h.node else "") for h in top.also)


def _hint_list(hints: list[Hint]) -> str:
    items = "".join(
        f'<li><span class="code">{text(h.code)}</span>'
        + (f" <code>{text(h.mechanism)}</code>" if h.mechanism else "")
        + f' <span class="dim">({text(h.confidence)})</span> {text(h.message)}'
        f'<p class="fix">{text(h.fix)}</p></li>'
        for h in hints
    )
    return f'<ul class="hints">{items}</ul>'


def _rows(case: CaseResult) -> list[tuple[str, Comparison]]:
    """What was compared, the forward value first when it failed (it makes the rest suspect)."""
    rows = [("(forward)", case.forward)] if case.forward and not case.forward.passed else []
    return rows + [(name, i.comparison) for name, i in case.labelled_inputs()]


def _comparison_table(case: CaseResult) -> str:
    rows = _rows(case)
    if not rows:
        return ""
    head = "".join(
        f"<th>{h}</th>"
        for h in ("", "ref shape", "engine shape", "max abs", "max rel", "mismatched", "")
    )
    body = "".join(
        f'<tr class="{c.status}"><td><b>{text(name)}</b></td><td>{shape(c.reference_shape)}'
        f"</td><td>{shape(c.engine_shape)}</td><td class=num>{number(c.max_abs_diff)}</td>"
        f"<td class=num>{number(c.max_rel_diff)}</td><td class=num>{c.mismatched}/{c.size}"
        f'</td><td class="status">{c.status}</td></tr>'
        for name, c in rows
    )
    return f"<h3>Compared</h3><table><tr>{head}</tr>{body}</table>"


def _failing_inputs(case: CaseResult) -> str:
    return "".join(
        f"<h3>{'Forward value' if name == '(forward)' else f'Input {text(name)}'}</h3>"
        + heatmaps(name if name != "(forward)" else "output", comparison)
        for name, comparison in _rows(case)
        if not comparison.passed
    )


def _traceback(case: CaseResult) -> str:
    if not case.traceback:
        return ""
    return (
        f"<details><summary>the engine's traceback</summary><pre>{text(case.traceback)}"
        "</pre></details>"
    )


def _source(case: CaseResult, file_lines: list[str] | None) -> str:
    """The case's lines of YAML, numbered; the line a problem is on (an invalid case's,
    inside the case) in bold."""
    lines, cut = case_source(file_lines, case.line) if file_lines is not None else ([], False)
    if not lines:
        return f'<p class="note">The case file {text(case.file)} could not be read.</p>'
    marked = case.line if case.line != lines[0][0] else None
    body = "\n".join(
        f'<span class="ln">{n}</span>'
        + (f'<b class="at">{text(line)}</b>' if n == marked else text(line))
        for n, line in lines
    )
    notes = [f"Line {marked}, in bold, is where the problem is."] if marked else []
    notes += [f"Only the first {len(lines)} lines."] if cut else []
    return (
        f"<h3>The case, {text(case.file)} line {lines[0][0]}</h3><pre class=source>{body}</pre>"
        + "".join(f'<p class="note">{note}</p>' for note in notes)
    )


def _listed(cases: list[CaseResult]) -> str:
    if not cases:
        return ""
    items = "".join(
        f'<li class="{case.status}"><span class="status">{STATUS_WORD[case.status]}</span> '
        f"<code>{text(case.file)}::{text(case.name)}</code>"
        + (f' <span class="dim">{text(case.message)}</span>' if case.message else "")
        + "</li>"
        for case in cases
    )
    counts = ", ".join(
        f"{n} {status}"
        for status in ("passed", "skipped")
        if (n := sum(1 for c in cases if c.status == status))
    )
    return (
        f'<section id="passed"><details open><summary><h2>Passed and skipped ({counts})</h2>'
        f'</summary><ul class="compact">{items}</ul></details></section>'
    )
