"""Limits shared by the command line, the loader and the runner.

Plain numbers in a module that imports nothing, so the command line can show them as
option defaults without importing the pipeline (and NumPy) first.
"""

# Inputs larger than this are refused from their shape alone, before any allocation.
MAX_ELEMENTS = 10_000_000

# The stale-gradients check asks the engine for the gradients a second time: a whole
# extra backward pass. What it catches (gradients never zeroed, a tape consumed by the
# first call, cached results) does not depend on the arrays' size, so cases with more
# input elements than this ask once, and the small cases every suite has do the check.
STALE_CHECK_LIMIT = 1_000_000

# Totals, as multiples of the per-array limit (so --max-elements moves them too): the
# values of every input and node of one case (what an engine's tape holds), and of
# every case of one run (what a run computes at most).
CASE_ELEMENTS = 5
RUN_ELEMENTS = 100

# Seconds an engine may spend on one case (and again on its diagnosis) in a worker
# process before the worker is killed and the case reported as timed out.
TIMEOUT = 60.0

# The threads of the engine's worker and TensorFlow while both run (`runner.threads`):
# "auto" (the cores split between them), "off", or "REF:ENGINE" ("1:3").
THREADS = "auto"


def is_thread_budget(setting: object) -> bool:
    """Whether `setting` spells a thread budget: auto, off, or two whole numbers >= 1."""
    if setting in ("auto", "off"):
        return True
    parts = setting.split(":") if isinstance(setting, str) else []
    return len(parts) == 2 and all(p.isdigit() and int(p) >= 1 for p in parts)
