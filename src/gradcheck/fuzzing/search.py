"""The search: Hypothesis generates, gradcheck checks, Hypothesis shrinks (SPEC §10).

A round is one `hypothesis.find`. It draws examples until one fails in a way not found
yet, a *bug*: its top hint's code and op (for an engine error, what raised what). From
then on the round's condition holds only for that bug, so Hypothesis shrinks the
example while it fails *that* way, never slipping to another bug, and returns the
smallest. The next round searches on, the bugs found so far counting as passes, until
the example budget or the time is spent. Hypothesis runs without a database (nothing is
written) and with its health checks off (slow examples and filtered draws are this
tool's normal), from a seed, so a run is reproducible.

Checking an example asks TensorFlow only when it is worth it: the engine's numbers are
first compared with the builtin engine's (which the test suite holds to TensorFlow and
finite differences op by op, and which `domain.admissible` already ran); only an
example where they differ is checked as any case is, by `runner.check_case`, against
the run's reference (TensorFlow unless `RunOptions.reference` says otherwise), the
diagnosis naming the bug. The rare example where the reference then agrees with the
engine is counted as unconfirmed, never reported.
A failure whose top hint is `precision` (a few ulps: a tolerance question, not a bug,
SPEC §6) is counted as rounding, not reported.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, find, settings
from hypothesis.errors import NoSuchExample

from ..cases.model import Case
from ..comparison.compare import compare
from ..diagnosis.run.root_causes import lead
from ..engines.driver import Unsupported
from ..engines.protocol import EngineFactory
from ..engines.reverse import run_engine
from ..results import CaseResult
from ..runner import RunOptions, check_case
from .coverage import Coverage
from .generate import Example, Space, examples

BugKey = tuple[str, str | None]  # the top hint's code and op
SHRINK_SECONDS = 60.0  # per bug; then the smallest example so far is the one reported
REPEATS = 20  # examples a round may draw beyond the budget, for those already checked


@dataclass(frozen=True)
class Budget:
    max_examples: int = 1000
    seconds: float | None = None  # for the search; shrinking a found bug finishes regardless
    max_bugs: int | None = None  # stop once this many are found (1: `--fail-fast`)


@dataclass
class Finding:
    """A bug and the smallest example Hypothesis found that fails that way."""

    key: BugKey
    example: Example
    result: CaseResult
    after_examples: int  # examples tried when it was first seen
    after_s: float  # seconds into the run when it was first seen
    shrink_s: float
    shrink_steps: int


@dataclass
class Progress:
    """What the search is doing, for a progress line."""

    examples: int
    bugs: int
    elapsed_s: float
    seconds_left: float | None
    shrinking: BugKey | None = None
    shrink_steps: int = 0


@dataclass
class SearchResult:
    findings: list[Finding]
    examples: int  # distinct examples checked while searching
    shrink_steps: int  # examples checked while shrinking
    rejected: int  # drawn, then thrown away for leaving an op's domain
    skipped: int  # the engine raised NotImplementedError for them
    unconfirmed: int  # differed from the builtin engine, but the reference agreed with the engine
    rounding: int  # failed by a few ulps only (top hint `precision`)
    # the reference could not compute them: the generator's problem (a domain to tighten)
    reference_failed: int
    coverage: Coverage
    duration_s: float
    # "max-examples", "time", "max-bugs", "exhausted" (nothing new to draw) or "interrupted"
    stopped: str


class _Stop(BaseException):
    """Raised from the condition when the search's budget is spent. Not an `Exception`, so
    Hypothesis lets it through at once (as it does KeyboardInterrupt) instead of taking
    it for a failure to shrink."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Outcome:
    bug: BugKey | None
    result: CaseResult | None = None


@dataclass(repr=False)  # Hypothesis shows its condition's repr; the cache would be megabytes
class _Search:
    """The condition of every round, and what the rounds have found."""

    factory: EngineFactory
    budget: Budget
    options: RunOptions
    on_progress: Callable[[Progress], None] | None
    started: float = field(default_factory=time.monotonic)
    found: dict[BugKey, Finding] = field(default_factory=dict)
    cache: dict[str, _Outcome] = field(default_factory=dict)
    coverage: Coverage = field(default_factory=Coverage)
    examples: int = 0
    new_in_round: int = 0
    shrink_steps: int = 0
    rejected: int = 0
    skipped: int = 0
    unconfirmed: int = 0
    rounding: int = 0
    reference_failed: int = 0
    # the bug this round shrinks, and since when
    target: BugKey | None = None
    target_since: float = 0.0
    target_examples: int = 0
    target_steps: int = 0

    def __call__(self, example: Example) -> bool:
        key = json.dumps(example.data, sort_keys=True)
        if self.target is None:  # searching
            new = key not in self.cache
            if self.seconds_left() == 0:
                raise _Stop("time")
            if new and self.examples >= self.budget.max_examples:
                raise _Stop("max-examples")
            outcome = self._outcome(example, key)
            if new:
                self.examples += 1
                self.new_in_round += 1
                self.coverage.add(example.case, example.program.kinks)
            if outcome.bug is not None and outcome.bug not in self.found:
                self.target, self.target_since = outcome.bug, time.monotonic()
                self.target_examples, self.target_steps = self.examples, self.shrink_steps
            self._report()
            return self.target is not None
        self.shrink_steps += 1
        self._report()
        if key not in self.cache and time.monotonic() - self.target_since > SHRINK_SECONDS:
            return False  # out of shrinking time: only what is known still counts
        return self._outcome(example, key).bug == self.target

    def seconds_left(self) -> float | None:
        if self.budget.seconds is None:
            return None
        return max(0.0, self.budget.seconds - (time.monotonic() - self.started))

    def reject(self) -> None:
        self.rejected += 1

    def record(self, example: Example) -> None:
        """The round's smallest example for its bug becomes a finding."""
        key = json.dumps(example.data, sort_keys=True)
        assert self.target is not None and self.cache[key].bug == self.target
        result = self.cache[key].result
        assert result is not None
        self.found[self.target] = Finding(
            self.target,
            example,
            result,
            after_examples=self.target_examples,
            after_s=self.target_since - self.started,
            shrink_s=time.monotonic() - self.target_since,
            shrink_steps=self.shrink_steps - self.target_steps,
        )
        self.target = None

    def _outcome(self, example: Example, key: str) -> _Outcome:
        if key not in self.cache:
            self.cache[key] = self._check(example)
        return self.cache[key]

    def _check(self, example: Example) -> _Outcome:
        agrees = agrees_with_builtin(example, self.factory)
        if agrees is None:
            self.skipped += 1
            return _Outcome(None)
        if agrees:
            return _Outcome(None)
        result = check_case(example.case, self.factory, self.options)
        if result.reference_failed:  # SPEC §10: never a bug of the engine
            self.reference_failed += 1
            return _Outcome(None, result)
        if result.status in ("passed", "skipped"):
            self.unconfirmed += 1
            return _Outcome(None, result)
        bug = bug_key(result, example.case)
        if bug[0] == "precision":
            self.rounding += 1
            return _Outcome(None, result)
        return _Outcome(bug, result)

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(
                Progress(
                    self.examples,
                    len(self.found),
                    time.monotonic() - self.started,
                    self.seconds_left(),
                    self.target,
                    self.shrink_steps - self.target_steps if self.target else 0,
                )
            )


def run(
    space: Space,
    factory: EngineFactory,
    *,
    budget: Budget,
    seed: int,
    options: RunOptions,
    on_progress: Callable[[Progress], None] | None = None,
) -> SearchResult:
    """Fuzz the engine `factory` makes over `space`: every bug found, each shrunk."""
    run = _Search(factory, budget, options, on_progress)
    seeds = random.Random(seed)
    with seed_alone():
        stopped = _rounds(run, space, budget, seeds)
    return SearchResult(
        findings=list(run.found.values()),
        examples=run.examples,
        shrink_steps=run.shrink_steps,
        rejected=run.rejected,
        skipped=run.skipped,
        unconfirmed=run.unconfirmed,
        rounding=run.rounding,
        reference_failed=run.reference_failed,
        coverage=run.coverage,
        duration_s=time.monotonic() - run.started,
        stopped=stopped,
    )


def _rounds(run: _Search, space: Space, budget: Budget, seeds: random.Random) -> str:
    """Run rounds until one stops the search; why it stopped."""
    while True:
        run.new_in_round = 0
        try:
            example = find(
                examples(space, run.reject),
                run,
                # Each round starts over from Hypothesis' simplest examples, which earlier
                # rounds have checked: those repeats are free and do not count.
                settings=_settings(budget.max_examples - run.examples + REPEATS),
                random=random.Random(seeds.getrandbits(64)),
            )
        except NoSuchExample:
            if run.new_in_round == 0:  # Hypothesis drew nothing new: the space is exhausted
                return "exhausted"
            continue  # more repeats than allowed for: the budget is not spent yet
        except _Stop as stop:
            return stop.reason
        except KeyboardInterrupt:
            return "interrupted"
        run.record(example)
        if budget.max_bugs is not None and len(run.found) >= budget.max_bugs:
            return "max-bugs"


@contextlib.contextmanager
def seed_alone() -> Iterator[None]:
    """Draw from the seed alone. Hypothesis now and then draws a literal found in the
    source of any loaded module outside the standard library and site-packages (its
    "local constants"): gradcheck's own when installed in development mode, the user's
    engine and ops files, whatever else the process imported. A seeded search then
    changed with every edit that added a literal anywhere, and with the engine under
    test. That pool is emptied while the search runs (a private hook of Hypothesis's:
    where a release lacks it, nothing is patched)."""
    from hypothesis.internal.conjecture import providers

    local = getattr(providers, "_get_local_constants", None)
    empty = getattr(providers, "Constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if local is None or empty is None or cache is None:
        yield
        return
    providers._get_local_constants = empty  # a fresh Constants() is the empty pool
    cache.clear()  # the permitted constants computed with the old pool
    try:
        yield
    finally:
        providers._get_local_constants = local
        cache.clear()


def _settings(max_examples: int) -> settings:
    # Every setting that matters is given, so a user's Hypothesis profile changes nothing.
    return settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
        report_multiple_bugs=False,
    )


def agrees_with_builtin(example: Example, factory: EngineFactory) -> bool | None:
    """Whether the engine gives the builtin engine's forward value and gradients, the same
    when asked twice (False when the builtin engine cannot say); None when the engine
    does not support the example."""
    case, want = example.case, example.builtin
    if want is None:
        return False
    try:
        got = run_engine(
            factory(), case.expression, case.inputs, case.wrt, case.cotangent, ask_twice=True
        )
    except Unsupported:
        return None
    except Exception:  # an engine error: `check_case` says what it was
        return False
    tolerance = case.tolerance
    forward = compare(want.forward, got.forward, tolerance)
    if set(got.grads) != set(want.grads) or not forward.passed:
        return False
    again = got.grads_again or got.grads
    return all(
        compare(want.grads[name], grad, tolerance).passed
        and compare(grad, again[name], tolerance).passed
        for name, grad in got.grads.items()
    )


def describe(key: BugKey) -> str:
    """A bug's key as people read it: ``fault:mul.self (mul)``."""
    code, op = key
    return f"{code} ({op})" if op else code


_RAISED = re.compile(r"^(.*?) raised (\w+)")


def bug_key(result: CaseResult, case: Case) -> BugKey:
    """What makes two failures the same bug: the rule its root cause blames and the op
    (`root_causes.lead`, `Hint.rule`: a fingerprint and the hint whose mechanism it is are
    one bug), with the rule the engine computes where it was recovered (so that shrinking
    keeps it). An engine error is another way to fail than wrong numbers: ``("error",
    <that rule>)``, or where the diagnosis did not localise it, what raised which exception
    (a node as its op: sizes and names vary)."""
    top = lead(result)
    if result.status != "error":
        if top is None:
            return ("failed", None)
        named, op = top.rule
        return (f"{named} computing `{top.got_rule}`" if top.got_rule else named), op
    if top is not None:
        return "error", describe(top.rule)
    raised = _RAISED.match(result.message)
    if raised is None:  # "grad returned 2 arrays for 3 wrt nodes (x, y, z)"
        counted = re.sub(r"\d+", "N", re.split(r"[(:]", result.message)[0]).strip()
        return "error", re.sub(r"\bN (\w+?)s\b", r"N \1", counted)  # 1 array, 2 arrays: one bug
    what, exception = raised.groups()
    ops = {n.text: n.op.name for n in case.expression.op_nodes if n.op is not None}
    return "error", f"{ops.get(what, what)} raised {exception}"
