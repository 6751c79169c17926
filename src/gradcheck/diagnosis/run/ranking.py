"""Ranking and folding: the order a reader can trust, and no rival that is a consequence.

Hints are ordered by confidence first (exact, likely, possible), then, within a tier, by
how specific they are: a wrong forward pass, stale gradients, a fingerprint of the
whole case, a named node (kink, op-vjp, backprop-driver), then the patterns of one
input. Hints that follow from the top one are folded into it (`Hint.also`): under an
exact fingerprint, the nodes and patterns it reproduces; under a single failing node's
mechanism or a located driver hint, the input patterns they cause; a `nan-mismatch`
under the node whose `nan-region` explains it; a fingerprint that a node's mechanism
already names.
"""

from __future__ import annotations

from ...results import CONFIDENCE_RANK, Hint
from ..faults.catalogue import FAULTS

# Within a confidence tier: lower is more specific.
_SPECIFICITY = {
    "forward-mismatch": 0,
    "stale-gradients": 1,
    "precision": 2,
    "kink": 4,
    "op-vjp": 5,
    "op-jvp": 5,
    "op-hvp": 5,
    "backprop-driver": 6,
    "jvp-driver": 6,
    "jvp-vjp-mismatch": 7,
    "missing-unbroadcast": 7,
    "unbroadcast-size1": 7,
    "shape-mismatch": 7,
    "nan-mismatch": 8,
}
_FAULT, _VALUE_PATTERN, _BESIDE_BUG = 3, 9, 10
LOCALISED = ("op-vjp", "kink", "backprop-driver")


def rank(hint: Hint) -> tuple[int, int]:
    """Sort key, strongest first: (confidence tier, specificity)."""
    kind = _FAULT if hint.code.startswith("fault:") else _SPECIFICITY.get(hint.code, _VALUE_PATTERN)
    return CONFIDENCE_RANK[hint.confidence], kind


def rank_beside_bug(hint: Hint) -> tuple[int, int]:
    """As `rank`, but rounding on one input never outranks a real bug on another."""
    if hint.code == "precision":
        return len(CONFIDENCE_RANK), _BESIDE_BUG
    return rank(hint)


def dedupe(hints: list[Hint]) -> list[Hint]:
    seen, out = set(), []
    for hint in hints:
        key = (hint.code, hint.message)
        if key not in seen:
            seen.add(key)
            out.append(hint)
    return out


def fold(hints: list[Hint], failing_nodes: int) -> list[Hint]:
    """`hints` (ranked) with the consequences of the top one, and NaN patterns a node's
    `nan-region` explains, folded into the hint that explains them."""
    if not hints:
        return hints
    top, rest = hints[0], hints[1:]
    kept = [top]
    regions = [h for h in hints if h.mechanism == "nan-region"]
    for hint in rest:
        home = _explained_by(top, hint, failing_nodes)
        if home is None and hint.code == "nan-mismatch" and regions:
            home = regions[0]
        if home is None:
            kept.append(hint)
        else:
            home.also.append(hint)
    return kept


def _explained_by(top: Hint, hint: Hint, failing_nodes: int) -> Hint | None:
    if hint.code in ("forward-mismatch", "stale-gradients") or top.confidence != "exact":
        return None
    if top.mechanism is not None and hint.code == top.mechanism:
        return top  # the fingerprint a node's mechanism already names
    pattern = hint.code not in LOCALISED and not hint.code.startswith("fault:")
    if top.code.startswith("fault:"):
        fault = FAULTS.get(top.code.removeprefix("fault:"))
        if fault is None:
            return None
        if pattern and hint.code != "precision":
            return top  # the fault reproduces every gradient: its patterns follow from it
        if hint.code in LOCALISED and (fault.driver is not None or hint.op in fault.ops):
            return top
        return None
    if top.code in ("op-vjp", "kink") and failing_nodes == 1 and pattern:
        return top if hint.code != "precision" else None
    if top.code == "backprop-driver" and top.node is not None and pattern:
        return top if hint.code != "precision" else None  # the input patterns it causes
    return None
