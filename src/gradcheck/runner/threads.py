"""The thread budget of a run whose engine works in its worker while TensorFlow computes
the reference here (issue 24): each side's threads sized so that together they fit the
cores, as NumPy's BLAS threads in the worker and TensorFlow's here, each as many as the
cores, oversubscribe them (1.6x the sequential computation on two cores, measured).

``threads`` (``--threads``, the config's ``threads``): ``auto`` splits the cores this
process may use, TensorFlow half (rounded down, at least one) and the engine the rest;
``REF:ENGINE`` sets both (``1:3``); ``off`` leaves both alone. The budget applies only
while both run: TensorFlow's intra-op threads are set once, at its import, in a run that
overlaps (``isolate="process"``); the worker's BLAS and OpenMP threads (`threadpoolctl`)
are limited for a case's engine step only while this process computes its reference, and
never when the engine runs alone (a cached reference, its diagnosis, ``isolate="none"``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import UsageError
from ..util.limits import is_thread_budget


@dataclass(frozen=True)
class ThreadBudget:
    reference: int  # TensorFlow's intra-op threads
    engine: int  # the worker's BLAS/OpenMP threads while the reference is computed beside it
    cores: int  # what `auto` split, for the report

    def describe(self) -> str:
        return (
            f"threads while both run: TensorFlow {self.reference}, the engine's worker "
            f"{self.engine} (of {self.cores} cores)"
        )


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, where the system has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_budget(setting: str, cores: int | None = None) -> ThreadBudget | None:
    """The budget `setting` (``auto``, ``off``, ``REF:ENGINE``) gives on `cores`; None: off."""
    if not is_thread_budget(setting):
        raise UsageError(f"threads must be auto, off or REF:ENGINE (e.g. 1:3), not {setting!r}")
    cores = cores or usable_cores()
    if setting == "off":
        return None
    if setting == "auto":
        reference = max(1, cores // 2)
        return ThreadBudget(reference, max(1, cores - reference), cores)
    reference, engine = (int(n) for n in setting.split(":"))
    return ThreadBudget(reference, engine, cores)
