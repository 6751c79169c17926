"""The run as a whole (SPEC §6.2): failing cases grouped by the one cause that explains them.

Made after the run from the cases' results alone (plain data, wherever the cases ran).
Each failing case offers its *explanations*: the hints that tie with its top hint in
strength (several exact fingerprints that each reproduce the whole case, the failing
nodes' op-vjp hints, ...). An explanation is known across cases by its `key`, what it
says without the case's own words and nodes. The causes are then picked greedily: the
explanation that fits the most remaining cases first, with those cases, and so on. A
rival explanation that fits some cases of a group alone is kept with the first case of
the group it does not fit: that case decided between them. Where several explanations
tie on every case, the group says that no case tells them apart.

`cite` then puts the run's cause first among the hints of a case whose own first hint
another case ruled out, so every report agrees on what the case's best explanation is.
`known` hands the causes found so far to the next case's diagnosis.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from ...results import CaseResult, Hint, Rival, RootCause
from .ranking import rank

FAILING = ("failed", "error")
Key = tuple[object, ...]


def key(hint: Hint) -> Key:
    """What a hint says, without the case's own words: the same key in two cases is the
    same explanation (a fingerprint by its name; a localised hint by op, argument and
    mechanism, whatever node of the op it names)."""
    if hint.code.startswith("fault:"):
        return (hint.code,)
    return (hint.code, hint.op, hint.arg, hint.mechanism, hint.factor)


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


def root_causes(cases: Sequence[CaseResult]) -> list[RootCause]:
    """The failing cases grouped by root cause, the cause explaining most cases first."""
    offered = {c.id: explanations(c) for c in cases}
    order = [c.id for c in cases if offered[c.id]]
    left = list(order)
    found: list[RootCause] = []
    while left:
        counts = Counter(k for i in left for k in {key(h) for h in offered[i]})
        first: dict[Key, int] = {}  # ties go to the explanation offered first
        for i in left:
            for hint in offered[i]:
                first.setdefault(key(hint), len(first))
        best = max(counts, key=lambda k: (counts[k], -first[k]))
        group = [i for i in left if best in {key(h) for h in offered[i]}]
        rivals = _rivals(best, group, offered)
        found.append(RootCause(_said(best, group, offered, rivals), group, rivals))
        left = [i for i in left if i not in group]
    return found


def _rivals(best: Key, group: list[str], offered: dict[str, list[Hint]]) -> list[Rival]:
    rivals: dict[Key, Rival] = {}
    for i in group:
        for hint in offered[i]:
            if key(hint) != best and key(hint) not in rivals:
                misses = [j for j in group if key(hint) not in {key(h) for h in offered[j]}]
                rivals[key(hint)] = Rival(label(hint), misses[0] if misses else None)
    return list(rivals.values())


def _said(best: Key, group: list[str], offered: dict[str, list[Hint]], rivals: list[Rival]) -> Hint:
    """The cause's hint: as the deciding case says it (else the first case), without what
    only one case has (its folded consequences; its node, unless every case names it)."""
    deciding = next((r.ruled_out_by for r in rivals if r.ruled_out_by), group[0])
    said = {i: next(h for h in offered[i] if key(h) == best) for i in group}
    hint = said[deciding]
    nodes = {h.node for h in said.values()}
    return replace(hint, also=[], node=hint.node if len(nodes) == 1 else None)


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
