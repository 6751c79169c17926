"""The backward driver: the node where traversal or accumulation goes wrong (SPEC §6.1).

When every op node passes alone, the rules are right and the driver is not. The engine
is asked once more, for its gradients with respect to every node between the inputs
and the output (SPEC §4 lets `wrt` hold intermediate nodes; for a functional engine
gradcheck cuts the graph at each node itself), and the builtin engine gives the right
ones. Output first, the first node whose gradient is wrong has consumers whose
gradients are right, so what each use of it should have passed on is known exactly.
Its gradient is then held against the stories a driver can tell, each a sum of those
shares:

* `no-accumulate`: exactly one use's share, whichever one (order does not matter);
* `missed-node`: every share but those of one consumer, which never passed its
  gradient on (zero, for a node with no other consumer);
* `per-path`: a share counted more than once; or, for a consumer used several times
  itself, the share of its first uses arriving again each time a later use added to it;
* `early-propagation`: a consumer used several times passed its gradient on before
  every one of its uses had added to it;
* else `unknown`, with the node named.

A story that matches reproduces the engine's gradient there within the case's
tolerance: the hint is `exact`, and says so when another story matches too. Asked
twice, the same request names the first node whose gradient a second pass adds onto
the first (`stale-gradients`, mechanism `not-zeroed`). `adjoints.py` gathers the
gradients.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...expression import Node
from ...results import Hint
from ..evidence import Evidence
from .adjoints import Adjoints, Use, adjoints

MAX_USES = 8  # uses of a node the stories combine; a node used more often gets `unknown`
MAX_RECOUNTED = 3  # uses of a consumer whose counts are searched in full (up to 4**3)
SCREEN = 512  # elements a story is tried on first, on a large array
NO_INTERMEDIATES = (
    "less precise: the engine gives no gradients with respect to intermediate nodes ({why}); "
    "with them gradcheck names the node where the driver goes wrong and how"
)

FIXES = {
    "no-accumulate": "add each consumer's share to a value's gradient, never assign it: "
    "`grad[x] = grad[x] + share` (`+=`, not `=`)",
    "missed-node": "walk every node between the inputs and the output, each after all of its "
    "consumers: build the topological order through every argument of every node and "
    "visit all of it, `for node in reversed(topological_order(output))`",
    "per-path": "pass each node's gradient on once, when it is complete: walk "
    "`reversed(topological_order(output))` instead of recursing into (or queueing again) "
    "a node each time one of its consumers adds to it",
    "early-propagation": "pass a node's gradient on only after every consumer has added its "
    "share: walk `reversed(topological_order(output))`, each node after all of its consumers, "
    "not a visited set or a queue on the way down",
    "unknown": "walk the nodes in reverse topological order, add (never overwrite) each "
    "consumer's share, and pass each node's complete gradient on exactly once: "
    "`for node in reversed(topological_order(output))`",
    "not-zeroed": "reset every node's gradient before each backward pass, the intermediate "
    "nodes' too and not only the leaves' (`for node in topological_order(output): "
    "node.grad = 0`), or build a fresh graph for each call",
}


def _generic(note: str) -> Hint:
    """Today's hint, with what kept driver localisation from saying more."""
    return Hint(
        "backprop-driver",
        "every op node passes when checked alone, but the whole expression fails: the "
        f"backward pass's traversal or accumulation is wrong, not a rule ({note})",
        "visit nodes in reverse topological order (`reversed(topological_order(out))`) "
        "and add, not overwrite, the gradients of a value used more than once "
        "(`grad[x] = grad[x] + share`)",
        "likely",
        mechanism="unknown",
    )


# -- the stories ----------------------------------------------------------------------


@dataclass(frozen=True)
class Story:
    """How the node's gradient came about: `parts` (weight, share) summed."""

    mechanism: str
    parts: tuple[tuple[float, np.ndarray], ...]
    consumer: Node | None = None  # the consumer the story is about
    use: Use | None = None  # the one use whose share the node kept
    counts: tuple[int, ...] | None = None  # per use of `consumer`: how often its share arrived


def stories(found: Adjoints, node: Node) -> list[Story]:
    """Every story worth trying at `node`, simplest first."""
    uses = found.uses[node]
    if len(uses) > MAX_USES:
        return []
    shares = [found.right_share(u) for u in uses]
    told: list[Story] = []
    if len(uses) > 1:
        told += [
            Story("no-accumulate", ((1.0, s),), use=u) for u, s in zip(uses, shares, strict=True)
        ]
    for consumer in dict.fromkeys(c for c, _ in uses):
        kept = tuple((1.0, s) for (c, _), s in zip(uses, shares, strict=True) if c is not consumer)
        told.append(Story("missed-node", kept, consumer))
    for consumer in dict.fromkeys(c for c, _ in uses):
        told += _recounted(found, node, consumer, uses, shares)
    return told


def _recounted(
    found: Adjoints, node: Node, consumer: Node, uses: list[Use], shares: list[np.ndarray]
) -> list[Story]:
    """`consumer`, used several times itself, passed its gradient on to `node` at the wrong
    moments: the share of each of its uses arrived `n` times, not once."""
    own = found.uses[consumer]
    if len(own) < 2:
        return []
    rest = tuple((1.0, s) for (c, _), s in zip(uses, shares, strict=True) if c is not consumer)
    positions = [p for c, p in uses if c is consumer]
    parts = []
    for use in own:
        arrived = found.right_share(use)  # what this use of the consumer added to it
        parts.append(sum(found.share((consumer, p), arrived) for p in positions))
    top = len(own) if len(own) <= MAX_RECOUNTED else 2
    counts = [
        c
        for c in itertools.product(range(top + 1), repeat=len(own))
        if any(n != 1 for n in c) and any(c)
    ]
    if len(own) > MAX_RECOUNTED:  # only one use off by one
        counts = [c for c in counts if sum(n != 1 for n in c) == 1]
    counts.sort(key=lambda c: (sum(abs(n - 1) for n in c), c))
    return [
        Story(
            "per-path" if max(c) > 1 else "early-propagation",
            rest + tuple((float(n), p) for n, p in zip(c, parts, strict=True) if n),
            consumer,
            counts=c,
        )
        for c in counts
    ]


def fits(found: Adjoints, story: Story, got: np.ndarray) -> bool:
    """Whether the story's sum is the engine's gradient (tried on a sample first)."""
    if got.size > SCREEN:
        rng = np.random.default_rng(got.size)
        sample = rng.choice(got.size, SCREEN, replace=False)
        value = _total(story, got.shape, lambda a: np.asarray(a).reshape(-1)[sample])
        if not found.same(value, got.reshape(-1)[sample]):
            return False
    return found.same(_total(story, got.shape, np.asarray), got)


def _total(story: Story, shape: tuple[int, ...], view: Callable) -> np.ndarray:
    total = view(np.zeros(shape))
    for weight, share in story.parts:
        total = total + weight * view(np.broadcast_to(np.asarray(share, np.float64), shape))
    return total


# -- the hint -------------------------------------------------------------------------


def driver_hint(evidence: Evidence) -> Hint:
    """Where and how the driver goes wrong, or today's hint when the engine cannot say."""
    found = adjoints(evidence)
    if isinstance(found, str):
        return _generic(NO_INTERMEDIATES.format(why=found))
    node = found.first_wrong(found.engine, found.right)
    if node is None:
        return _generic(
            "asked for every node's gradient at once, the engine gave right ones: its driver "
            "goes wrong only when asked for the inputs alone"
        )
    return located(found, node)


def unexplained(evidence: Evidence, failing: dict[str, list[int]]) -> list[Hint]:
    """A driver hint when the first wrong node is not explained by a use that fails alone
    (`failing`: node text -> the arguments whose VJP is wrong alone)."""
    found = adjoints(evidence)
    if isinstance(found, str):
        return []
    node = found.first_wrong(found.engine, found.right)
    if node is None or any(p in failing.get(c.text, ()) for c, p in found.uses[node]):
        return []
    if any(c.text in failing for c, _ in found.uses[node]):
        return []  # a consumer whose forward (or a whole node) is wrong: not the driver
    hint = located(found, node)
    hint.message = f"besides the nodes that fail alone: {hint.message}"
    return [hint]


def located(found: Adjoints, node: Node) -> Hint:
    """The hint for `node`, the first whose gradient is wrong: the story that fits."""
    got = found.engine[node]
    fitting = [] if got.shape != found.right[node].shape else _fitting(found, node, got)
    if not fitting:
        return Hint(
            "backprop-driver",
            f"{found.label(node)} is the first node, output first, whose gradient is wrong "
            f"while its consumers' are right (it is used {_uses(found, node)}): the driver "
            f"goes wrong there; {_quoted(node)} {_worst(found.right[node], got)}",
            FIXES["unknown"],
            "likely",
            node=node.text,
            mechanism="unknown",
        )
    story = fitting[0]
    rivals = sorted({s.mechanism for s in fitting} - {story.mechanism})
    message = _says(found, node, story)
    if rivals:
        message += f" (or {' or '.join(rivals)}: nothing in this graph tells them apart)"
    return Hint(
        "backprop-driver",
        message,
        FIXES[story.mechanism],
        "exact",  # the story reproduces the engine there, as a fingerprint does; so may a rival
        node=node.text,
        mechanism=story.mechanism,
    )


def _fitting(found: Adjoints, node: Node, got: np.ndarray) -> list[Story]:
    """The stories that give the engine's gradient at `node`, best first. A consumer said to
    have never passed its gradient on is checked on its other arguments: one that got its
    share refutes the story; one that lacks it too confirms it over every other."""
    fitting = []
    for story in stories(found, node):
        if not fits(found, story, got):
            continue
        if story.mechanism == "missed-node":
            passed_on = _passed_on(found, node, story)
            if passed_on is True:
                continue
            if passed_on is False:
                return [story]
        fitting.append(story)
    return fitting


def _passed_on(found: Adjoints, node: Node, story: Story) -> bool | None:
    """Whether the story's consumer passed its share on to its other arguments: True when
    one of them got everything; False when one that only it uses got nothing of it (an
    argument other consumers use too may lack its share for another reason, an overwrite
    there); None when none tells."""
    consumer = story.consumer
    assert consumer is not None
    verdict = None
    for arg in consumer.args:
        if arg is node or arg not in found.engine:
            continue
        if found.same(found.right[arg], found.engine[arg]):
            return True  # it got everything, this consumer's share included
        only_here = all(c is consumer for c, _ in found.uses[arg])
        if only_here and found.same(np.zeros_like(found.right[arg]), found.engine[arg]):
            verdict = False
    return verdict


def _says(found: Adjoints, node: Node, story: Story) -> str:
    name, consumer = found.label(node), story.consumer
    used = _uses(found, node)
    if story.mechanism == "no-accumulate":
        kept = _use(found, story.use)
        return (
            f"{name} is used {len(found.uses[node])} times ({used}) and its gradient is the "
            f"share of {kept} alone, while its consumers' gradients are right: the driver "
            "overwrites a value's gradient where it must add every consumer's share"
        )
    assert consumer is not None
    skipped = found.label(consumer)
    if story.mechanism == "missed-node":
        lacks = "is zero" if not story.parts else f"lacks the share of {skipped}"
        return (
            f"{name}'s gradient {lacks} ({name} is used {used}): {skipped} has the right "
            "gradient but never passed it on (the driver skipped it, or visited it before "
            "it had any)"
        )
    assert story.counts is not None
    own = found.uses[consumer]
    times = {0: "not at all", 1: "once", 2: "twice"}
    tally = ", ".join(
        f"through {_use(found, u)} {times.get(n, f'{n} times')}"
        for u, n in zip(own, story.counts, strict=True)
    )
    if story.mechanism == "per-path":
        return (
            f"{name}'s gradient counts that of {skipped} more than once: used {len(own)} times, "
            f"it passed its gradient on each time a use added to it, so what reached it came "
            f"on to {name} {tally} (once per path, not once)"
        )
    late = " and ".join(_use(found, u) for u, n in zip(own, story.counts, strict=True) if n == 0)
    return (
        f"{skipped} passed its gradient on to {name} before {late} had added to it: used "
        f"{len(own)} times, what reached it came on to {name} {tally}"
    )


def _use(found: Adjoints, use: Use | None) -> str:
    assert use is not None
    consumer, position = use
    if consumer.args.count(consumer.args[position]) == 1:
        return found.label(consumer, named=False)
    return f"{found.label(consumer, named=False)} (argument {position})"


def _uses(found: Adjoints, node: Node) -> str:
    consumers = list(dict.fromkeys(found.label(c, named=False) for c, _ in found.uses[node]))
    if not consumers:
        return "by no op: it is the output"
    count = len(consumers)
    return f"by {count} consumer{'s' if count > 1 else ''}: {', '.join(consumers)}"


def _quoted(node: Node) -> str:
    """Where the numbers a driver hint quotes come from: an input's arrays are shown with
    the case; an inner node's gradient is asked for besides (SPEC §6.1)."""
    if node.op is None:
        return "its gradient"
    return "its gradient (the engine's at that node, asked for beside the inputs' and not shown)"


def _worst(want: np.ndarray, got: np.ndarray) -> str:
    if want.shape != got.shape:
        return f"has shape {got.shape}, not {want.shape}"
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    index = np.unravel_index(int(np.argmax(np.where(np.isnan(diff), np.inf, diff))), want.shape)
    at = tuple(int(i) for i in index)
    return f"is {float(got[at]):.6g} at index {at}, where {float(want[at]):.6g} is right"


# -- stale gradients ------------------------------------------------------------------


def stale_node(evidence: Evidence) -> tuple[Node, str, str | None] | None:
    """The first node, output first, whose second answer differs from its first, what the
    story is (`not-zeroed` when the second is the first plus a full pass's), or None."""
    found = adjoints(evidence, again=True)
    if isinstance(found, str) or found.again is None:
        return None
    node = found.first_wrong(found.again, found.engine)
    if node is None:
        return None
    uses = found.uses[node]
    arrived: Sequence[np.ndarray] = [found.share(u, found.again[u[0]]) for u in uses]
    if not uses:  # the output: the seed itself
        arrived = [evidence.case.cotangent]
    story = Story("not-zeroed", ((1.0, found.engine[node]), *((1.0, s) for s in arrived)))
    zeroed = fits(found, story, found.again[node])
    says = (
        f"{found.label(node)}'s gradient is not reset between backward passes: asked again, it is "
        "the first answer plus a whole pass's (the nodes above it are right)"
        if zeroed
        else f"{found.label(node)} is the first node, output first, whose second answer differs"
    )
    return node, says, "not-zeroed" if zeroed else None
