"""The run as a whole (SPEC §6.2): failing cases grouped by the one cause that explains them.

Made after the run from the cases' results alone (plain data, wherever the cases ran).
Each failing case offers its *findings*, one per independent wrong rule (two wrong
rules at two nodes are two findings), and each finding its *explanations*: the hints
that tie in strength (several exact fingerprints that each reproduce the whole case, the
failing nodes' op-vjp hints, ...). An explanation is known across cases by its `key`,
what it says without the case's own words and nodes: one bug, one key (a fingerprint
and the op-vjp hint whose mechanism is that fingerprint are the same cause). The causes
are then picked greedily: the explanation that fits the most remaining findings first,
with the cases of those findings, and so on. A rival explanation that fits some cases
of a group alone is kept with the first case of the group it does not fit: that case
decided between them. Where several explanations tie on every case, the group says that
no case tells them apart.

`cite` then puts the run's cause first among the hints of a case whose own first hint
another case ruled out, so every report agrees on what the case's best explanation is.
`known` hands the causes found so far to the next case's diagnosis.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from ...results import CaseResult, Hint, Rival, RootCause
from ..faults.catalogue import FAULTS
from .ranking import LOCALISED, rank

FAILING = ("failed", "error")
SHOWN_OPS = 3  # the ops a cause's message names where one shared step struck at several
Key = tuple[object, ...]
Finding = tuple[str, list[Hint]]  # a case's id, and the hints that explain one finding


def key(hint: Hint) -> Key:
    """What a hint says, without the case's own words: the same key in two cases is the
    same explanation, the same bug (`Hint.cause`); the fuzzer's one report per bug too."""
    return hint.cause


def label(hint: Hint) -> str:
    """A key in words: `fault:broadcast.no-reduce`, `op-vjp tanh argument 0 (zero)`."""
    words = [hint.code]
    if hint.op and not hint.code.startswith("fault:"):
        words.append(hint.op)
    if hint.arg is not None:
        words.append(f"argument {hint.arg}")
    if hint.mechanism:
        words.append(f"({hint.mechanism})")
    return " ".join(words)


def explanations(case: CaseResult) -> list[Hint]:
    """The hints of `case` that explain it as well as its top hint does, by key, strongest
    first. A wrong forward value is explained by the nodes whose forward is wrong alone."""
    if case.status not in FAILING or not case.hints:
        return []
    strength = rank(case.hints[0])
    tied = [h for h in case.hints if rank(h) == strength]
    if tied[0].code == "forward-mismatch" and any(h.op for h in tied):
        tied = [h for h in tied if h.op]
    unique: dict[Key, Hint] = {}
    for hint in tied:
        unique.setdefault(key(hint), hint)
    return list(unique.values())


def findings(case: CaseResult) -> list[list[Hint]]:
    """The independent wrong rules `case` shows, each as its explanations: unless a
    fingerprint reproduces the whole case (then it is one finding, its rivals the other
    explanations), each node and argument a top-level localised hint names is one (an
    `also` is a consequence, never a finding of its own), the rest of the top hint's
    explanations another."""
    first = explanations(case)
    if not first or any(h.code.startswith("fault:") for h in first):
        return [first] if first else []
    found: dict[object, dict[Key, Hint]] = {}
    for hint in [*first, *(h for h in case.hints if h.code in LOCALISED)]:
        where = (hint.node, hint.arg) if hint.code in LOCALISED else None
        found.setdefault(where, {}).setdefault(key(hint), hint)
    return [list(hints.values()) for hints in found.values()]


def lead(case: CaseResult) -> Hint | None:
    """The hint a failing case's bug is known by: of its findings, the first that names an
    op (a localised hint, a fingerprint at an op), else its top hint."""
    named = [h for hints in findings(case) for h in hints if h.op]
    return named[0] if named else (case.hints[0] if case.hints else None)


def root_causes(cases: Sequence[CaseResult]) -> list[RootCause]:
    """The failing cases grouped by root cause, the cause explaining most findings first;
    a case with two wrong rules is in two causes."""
    left: list[Finding] = [(c.id, hints) for c in cases for hints in findings(c)]
    found: list[RootCause] = []
    while left:
        counts = Counter(k for _, hints in left for k in {key(h) for h in hints})
        first: dict[Key, int] = {}  # ties go to the explanation offered first
        for _, hints in left:
            for hint in hints:
                first.setdefault(key(hint), len(first))
        best = max(counts, key=lambda k: (counts[k], -first[k]))
        chosen = [f for f in left if best in {key(h) for h in f[1]}]
        rivals = _rivals(best, chosen)
        group = list(dict.fromkeys(i for i, _ in chosen))
        found.append(RootCause(_said(best, chosen, rivals), group, rivals))
        left = [f for f in left if f not in chosen]
    return found


def _rivals(best: Key, chosen: list[Finding]) -> list[Rival]:
    rivals: dict[Key, Rival] = {}
    for _, hints in chosen:
        for hint in hints:
            if key(hint) != best and key(hint) not in rivals:
                misses = [i for i, hs in chosen if key(hint) not in {key(h) for h in hs}]
                rivals[key(hint)] = Rival(label(hint), misses[0] if misses else None)
    return list(rivals.values())


def _said(best: Key, chosen: list[Finding], rivals: list[Rival]) -> Hint:
    """The cause's hint: as the deciding case says it (else the first case), a
    fingerprint before a node's hint naming it, without what only one case has (its
    folded consequences; its node, unless every case names it)."""
    deciding = next((r.ruled_out_by for r in rivals if r.ruled_out_by), chosen[0][0])
    said = [(i, next(h for h in hints if key(h) == best)) for i, hints in chosen]
    fingerprints = [(i, h) for i, h in said if h.code.startswith("fault:")]
    pool = fingerprints or said
    hint = next((h for i, h in pool if i == deciding), pool[0][1])
    nodes = {h.node for _, h in said}
    hint = replace(hint, also=[], node=hint.node if len(nodes) == 1 else None)
    ops = list(dict.fromkeys(h.op for _, h in said if h.op))
    fault = FAULTS.get(hint.code.removeprefix("fault:"))
    if len(ops) > 1 and fault is not None and fault.at_op:  # one shared step, several ops
        hint.op = None
        more = f" and {len(ops) - SHOWN_OPS} more" if len(ops) > SHOWN_OPS else ""
        hint.message = f"{fault.summary}, at {', '.join(ops[:SHOWN_OPS])}{more}"
    return hint


def cite(cases: Sequence[CaseResult], causes: Sequence[RootCause]) -> None:
    """Where another case ruled out a case's own first hint, put the run's cause first
    among its hints (and its inputs'), carrying what was folded into the old first hint."""
    by_id = {c.id: c for c in cases}
    for cause in causes:
        wanted = key(cause.hint)
        ruled_out = {r.label for r in cause.rivals if r.ruled_out_by}
        for case in (by_id[i] for i in cause.cases):
            if label(case.hints[0]) not in ruled_out:
                continue
            at = next(n for n, h in enumerate(case.hints) if key(h) == wanted)
            if at:
                hint = case.hints.pop(at)
                hint.also, case.hints[0].also = case.hints[0].also + hint.also, []
                case.hints.insert(0, hint)
            for item in case.inputs:
                at = next((n for n, h in enumerate(item.hints) if key(h) == wanted), None)
                if at:
                    item.hints.insert(0, item.hints.pop(at))


def known(cases: Sequence[CaseResult]) -> list[tuple[Hint, str]]:
    """The explanations the cases so far offer that another case can confirm cheaply (a
    fingerprint, by running it; a located driver mechanism, by locating that case's), with
    the first case that offered each."""
    seen: dict[Key, tuple[Hint, str]] = {}
    for case in cases:
        for hint in explanations(case):
            located = hint.code == "backprop-driver" and hint.mechanism not in (None, "unknown")
            if hint.code.startswith("fault:") or located:
                seen.setdefault(key(hint), (hint, case.id))
    return list(seen.values())
