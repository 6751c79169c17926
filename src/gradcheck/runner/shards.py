"""`--shard K/N`: a run's cases split over N machines, each running one part.

Every shard sees the same cases in the same order and the same durations, so each
computes the same split: disjoint, and together complete. The split is balanced by how
long each case took when it last ran (`durations.json` in the reference cache's folder,
which a run that may write the cache keeps up to date, so that a CI sharing the cache as
an artifact shares them too); a case never timed counts as the median of those that
were. Longest first, each case goes to the shard with the least time so far, the ties
to the lowest shard: with no durations known, that is round robin in case order.
"""

from __future__ import annotations

import contextlib
import json
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..cases.model import Case, InvalidCase
from ..errors import UsageError
from ..results import CaseResult
from ..util.atomic import write_atomic

DURATIONS = "durations.json"
_SPEC = re.compile(r"(\d+)/(\d+)")
Item = Case | InvalidCase


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` with 1 <= K <= N, as (K, N); a `UsageError` (exit 2) for anything else."""
    found = _SPEC.fullmatch(text.strip())
    if found:
        k, n = int(found[1]), int(found[2])
        if 1 <= k <= n:
            return k, n
    raise UsageError(f"--shard {text!r}: write K/N, the shard K of N, with 1 <= K <= N (2/3)")


def case_id(item: Item) -> str:
    """`file::name`, as `CaseResult.id` names the case's result."""
    return f"{item.file}::{item.name}"


def shard(items: Sequence[Item], k: int, n: int, durations: dict[str, float]) -> list[Item]:
    """The items of shard `k` of `n`, in their order."""
    known = [durations[case_id(i)] for i in items if case_id(i) in durations]
    typical = statistics.median(known) if known else 1.0
    cost = [durations.get(case_id(item), typical) for item in items]
    loads = [0.0] * n
    chosen: set[int] = set()
    # Longest first; equal costs in case order (a stable sort), so the split is stable.
    for at in sorted(range(len(items)), key=lambda i: -cost[i]):
        least = min(range(n), key=lambda s: loads[s])
        loads[least] += cost[at]
        if least == k - 1:
            chosen.add(at)
    return [item for at, item in enumerate(items) if at in chosen]


def read_durations(folder: Path) -> dict[str, float]:
    """The case durations kept in the cache's `folder`; none if it has none, or they
    cannot be read (the split is then by case order)."""
    try:
        data = json.loads((folder / DURATIONS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float)) and v >= 0}


def durations_of(results: Sequence[CaseResult]) -> dict[str, float]:
    """How long each case that ran took, by case id."""
    return {c.id: c.duration_s for c in results if c.status not in ("invalid", "not run")}


def record_durations(folder: Path, ran: Mapping[str, float]) -> None:
    """Keep the durations of the cases that ran (`gradcheck run`'s, the pytest plugin's),
    by case id; a cache that cannot be written keeps none (the reference cache has said
    so already)."""
    if not ran or not folder.is_dir():
        return
    kept = {**read_durations(folder), **{k: round(v, 4) for k, v in ran.items()}}
    with contextlib.suppress(OSError):
        write_atomic(folder / DURATIONS, json.dumps(kept, indent=0))
