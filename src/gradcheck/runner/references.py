"""A case's reference (SPEC §8), from the cache or computed: TensorFlow's, the numeric
one, or both; and TensorFlow's one-off import, started early on a thread of its own so
that it overlaps the loading of files and engines, and left out of case durations."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from dataclasses import replace

from ..cases.model import Case
from ..checking.modes import checks
from ..comparison.trust import disagreements
from ..engines.builtin.engine import BuiltinEngine
from ..engines.checks import with_modes
from ..engines.driver import EngineFailure, EngineRun, build_expression
from ..references import tensorflow as tensorflow_module
from ..references.cache import ReferenceNotCached
from ..references.computed import computed_reference
from ..references.tensorflow import load_tensorflow
from .options import DEFAULT_OPTIONS, RunOptions


def reference_run(case: Case, options: RunOptions = DEFAULT_OPTIONS) -> EngineRun:
    """The case's reference (SPEC §8), from `options.cache` if it has it: TensorFlow's, the
    numeric one (`references.numeric`), or for `both` TensorFlow's with `doubts` where the
    finite differences disagree with it; with the forward-mode and second-order runs
    the case asks for (`EngineRun.jvp`, `EngineRun.hvp`)."""
    runs = {
        check: _reference(case, options, check)
        for check in checks(case, options.modes, options.order)
    }
    return with_modes(runs.pop("vjp", None), runs)


def reference_kind(case: Case, options: RunOptions) -> str:
    """The reference that judges the case: its own, or the run's, but the numeric one
    where an op's declaration says TensorFlow's gradient is wrong (`tensorflow_wrong`)."""
    kind = case.reference or options.reference
    return "numeric" if kind != "numeric" and tensorflow_wrong(case) else kind


def _reference(case: Case, options: RunOptions, check: str) -> EngineRun:
    kind = case.reference or options.reference
    if kind == "numeric":
        return _cached(case, options, "numeric", check)
    wrong = tensorflow_wrong(case)
    if wrong is not None:  # SPEC §3.1: the op's declaration says TensorFlow is wrong here
        numeric = _cached(case, options, "numeric", check)
        why = f"judged by the numeric reference, not TensorFlow: {wrong}"
        return replace(numeric, notes=[*numeric.notes, why])
    reference = _cached(case, options, "tensorflow", check)
    if kind == "both":
        numeric = _cached(case, options, "numeric", check)
        reference = replace(reference, doubts=disagreements(case, reference, numeric, check))
    return reference


def tensorflow_wrong(case: Case) -> str | None:
    """Why TensorFlow's gradient is wrong for this case (`Op.tf_wrong` of an op, on its
    argument values here), or None."""
    nodes = [n for n in case.expression.op_nodes if n.op is not None and n.op.tf_wrong]
    if not nodes:
        return None
    engine = BuiltinEngine()
    built = build_expression(engine, case.expression, case.inputs, set(), case.cotangent.dtype)
    for node in nodes:
        args = [engine.value(built[a]) for a in node.args]
        why = node.op.tf_wrong(*args, **node.attrs)
        if why is not None:
            return f"{node.text}: {why}"
    return None


def _cached(case: Case, options: RunOptions, kind: str, check: str) -> EngineRun:
    cache = options.cache
    cached = cache.get(case, kind, check) if cache is not None else None
    if cached is not None:
        return cached
    if options.require_cache:
        raise ReferenceNotCached(
            cache.not_cached_message(case, kind) if cache else "--require-cache needs a cache"
        )
    reference = computed_reference(case, kind, check)
    if cache is not None:
        cache.put(case, reference, kind, check)
    return reference


class CaseReference:
    """A case's reference, computed at once."""

    def __init__(self, case: Case, options: RunOptions) -> None:
        try:
            self.value, self.error = reference_run(case, options), None
        except EngineFailure as e:
            self.value, self.error = None, e

    def get(self) -> EngineRun:
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


def import_within(started: float, ended: float) -> float:
    """How long TensorFlow's import (in this process) lasted between `started` and `ended`."""
    return overlap(tensorflow_module.import_span, started, ended)


def overlap(span: tuple[float, float] | None, started: float, ended: float) -> float:
    """How long `span` (TensorFlow's import) lasted between `started` and `ended`."""
    return 0.0 if span is None else max(0.0, min(span[1], ended) - max(span[0], started))


# -- TensorFlow's import -------------------------------------------------------------

_import: threading.Thread | None = None  # the one background import of this process


def prefetch_tensorflow(options: RunOptions, cases: Iterable[Case] | None = None) -> None:
    """Start importing TensorFlow on a thread of its own, if the run will need it
    (`needs_tensorflow`), it is installed, and its import has not begun; a reference that
    needs it then waits for it (`load_tensorflow`'s lock)."""
    global _import
    if _import is not None or tensorflow_module.installed_version() is None:
        return
    if needs_tensorflow(options, cases):
        _import = threading.Thread(target=_import_quietly, name="gradcheck-import", daemon=True)
        _import.start()


def starting_tensorflow() -> bool:
    """Whether TensorFlow's one-off import is under way (the progress bar says so)."""
    return (_import is not None and _import.is_alive()) or tensorflow_module.importing()


def _import_quietly() -> None:
    with contextlib.suppress(Exception):  # a broken install is reported by the case needing it
        load_tensorflow()


def wait_for_import() -> None:
    """Wait for the background import: nothing of TensorFlow's runs once `run` returns."""
    if _import is not None:
        _import.join()


def needs_tensorflow(options: RunOptions, cases: Iterable[Case] | None = None) -> bool:
    """Whether a run will need TensorFlow, so that its import is worth starting early.

    Without `cases` (the files not yet read): whether the run's reference is TensorFlow's
    (or both) with no cache, or nothing in it yet. With them: whether one of them (its own
    `reference:` counted) needs a TensorFlow reference the cache does not hold. A run
    whose cases are all invalid, deselected, cached or numeric never waits for the import.
    (A reference found missing later imports TensorFlow when it is needed.)"""
    if options.require_cache:
        return False
    if cases is None:
        return options.reference != "numeric" and _cache_empty(options)
    return any(_needs_tensorflow(case, options) for case in cases)


def _needs_tensorflow(case: Case, options: RunOptions) -> bool:
    if (case.reference or options.reference) == "numeric":
        return False
    cache = options.cache
    if cache is None:
        return True
    # Only whether the entries exist: reading them is the run's (and counts hits).
    paths = [
        cache.path(case, "tensorflow", check)
        for check in checks(case, options.modes, options.order)
    ]
    return not all(path is not None and path.is_file() for path in paths)


def _cache_empty(options: RunOptions) -> bool:
    cache = options.cache
    if cache is None:
        return True
    try:
        return not any(cache.folder().iterdir())
    except OSError:
        return True
