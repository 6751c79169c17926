"""What a run produces: one `CaseResult` per case, with its inputs' comparisons and hints.

Every reporter (rich, JSON, JUnit, HTML) reads these objects; nothing else is shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Status = Literal["passed", "failed", "error", "skipped", "invalid", "not run"]
STATUSES: tuple[Status, ...] = ("passed", "failed", "error", "skipped", "invalid", "not run")
# A run stopped by a signal exits 128 + the signal's number, as a shell reports it.
SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143}
EXIT_NOTHING = 5  # no case was selected or found (SPEC §5), as pytest's "no tests ran"
Confidence = Literal["exact", "likely", "possible"]
CONFIDENCE_RANK = {"exact": 0, "likely": 1, "possible": 2}


# A hint's optional fields, in the order its JSON gives them.
HINT_FIELDS = (
    "mechanism",
    "op",
    "node",
    "arg",
    "region",
    "axes",
    "factor",
    "got_rule",
    "want_rule",
)


@dataclass
class Hint:
    """One explanation of a difference (SPEC §6): a stable code, what, how to fix, how sure."""

    code: str
    message: str
    fix: str
    confidence: Confidence
    op: str | None = None
    node: str | None = None
    arg: int | None = None
    axes: list[int] | None = None
    factor: float | None = None
    # SPEC §6.1: what is wrong with a localised rule, found by probing the engine
    # ("ignores-upstream", "nan-region", "maximum:split", ...), and where in terms of
    # the node's inputs ("a <= 0") for a region.
    mechanism: str | None = None
    region: str | None = None
    # SPEC §6.1 `formula`: the rule the engine computes, recovered by probing, beside the
    # op's right one, both in the rule texts' NumPy spelling.
    got_rule: str | None = None
    want_rule: str | None = None
    # Hints that are consequences of this one, folded into it ("also seen as ...").
    also: list[Hint] = field(default_factory=list)

    @property
    def rule(self) -> tuple[str, str | None]:
        """The rule this hint blames: a fingerprint by its name (and so a localised hint
        whose mechanism is that fingerprint), else its code; and the op it names."""
        fault = next((s for s in (self.code, self.mechanism) if s and s.startswith("fault:")), None)
        return fault or self.code, self.op

    @property
    def cause(self) -> tuple[object, ...]:
        """The bug this hint names, without the case's own words (SPEC §6.2: one bug, one
        root cause): a fingerprint by its name, whatever op it struck at; another hint by
        its `rule`, argument, mechanism, factor and recovered rule, whatever node of the op
        it names."""
        named, op = self.rule
        if named.startswith("fault:"):
            return (named,)
        return (named, op, self.arg, self.mechanism, self.factor, self.got_rule)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "fix": self.fix,
            "confidence": self.confidence,
        }
        for key in HINT_FIELDS:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.also:
            out["also"] = [{"code": h.code, "message": h.message} for h in self.also]
        return out


@dataclass
class Comparison:
    """How an engine's array compares with the reference's under the case's tolerance."""

    status: Literal["passed", "failed"]
    reference_shape: tuple[int, ...]
    engine_shape: tuple[int, ...]
    max_abs_diff: float | None  # None when the shapes differ
    max_rel_diff: float | None
    mismatched: int
    size: int
    worst_index: tuple[int, ...] | None = None
    reference: np.ndarray | None = None
    engine: np.ndarray | None = None
    rtol: float | None = None  # the tolerance the arrays were compared under
    atol: float | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class Consistency:
    """Forward and reverse mode against each other for one input (`modes: [rev, fwd]`):
    ``<vjp(u), t>`` (the gradient dotted with the tangent) against ``<u, jvp(t)>`` (the
    cotangent dotted with the JVP), equal for any correct engine; `bound` is how far apart
    the tolerance lets them be."""

    status: Literal["passed", "failed"]
    vjp_dot: float
    jvp_dot: float
    bound: float

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class InputResult:
    name: str
    comparison: Comparison
    hints: list[Hint] = field(default_factory=list)
    consistency: Consistency | None = None  # forward mode's, where reverse mode ran too

    @property
    def status(self) -> str:
        return self.comparison.status


@dataclass
class NodeResult:
    """Localisation: one op node checked alone (SPEC §6)."""

    node: str
    op: str
    status: Literal["passed", "failed", "error", "skipped"]
    args: list[int] = field(default_factory=list)
    check: str = "vjp"  # what was checked alone: its VJPs, its JVPs, or "hvp" (second order)


@dataclass
class GraphNode:
    """One node of the case's expression, as plain data (the HTML report draws the graph)."""

    text: str  # the node's source text, as `NodeResult.node` and `Hint.node` name it
    op: str | None  # None for an input or a literal
    args: list[int]  # positions of the argument nodes in `CaseResult.graph`
    shape: tuple[int, ...]
    name: str | None = None  # the input's name, or the binding that names the node
    # An op with several outputs (split): how many (its parts are nodes of their own, whose
    # `op` is the op and the output's position, "split[1]").
    outputs: int | None = None


@dataclass
class CaseResult:
    name: str
    file: str
    line: int
    status: Status
    expr: str = ""
    message: str = ""
    forward: Comparison | None = None
    inputs: list[InputResult] = field(default_factory=list)
    nodes: list[NodeResult] = field(default_factory=list)
    hints: list[Hint] = field(default_factory=list)
    graph: list[GraphNode] = field(default_factory=list)  # arguments first, the output last
    duration_s: float = 0.0
    traceback: str | None = None
    tags: list[str] = field(default_factory=list)
    reference: str = "tensorflow"  # the kind of reference it was checked against (SPEC §8)
    engine_dtype: str | None = None  # the dtype the engine returned its results in
    unsupported_ops: list[str] = field(default_factory=list)  # the ops that made it unsupported
    captured: str = ""  # what the engine printed during the case (stdout and stderr), capped
    reference_failed: bool = False  # an error of the reference's, not the engine's
    modes: list[str] = field(default_factory=lambda: ["rev"])  # what the case asked for ...
    order: int = 1
    # ... and beyond reverse mode's `inputs`: per input, the JVP along its tangent, and its
    # part of the gradient of sum(grad * v) (second order).
    jvp: list[InputResult] = field(default_factory=list)
    hvp: list[InputResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status in ("passed", "skipped")

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def id(self) -> str:
        """`file::name`, as the run's root causes list their cases (SPEC §6.2)."""
        return f"{self.file}::{self.name}"

    def labelled_inputs(self) -> list[tuple[str, InputResult]]:
        """Every input's comparisons by the name reports show: reverse mode's as the
        input's, forward mode's and second order's with the check (``x [jvp]``)."""
        return [
            *((i.name, i) for i in self.inputs),
            *((f"{i.name} [jvp]", i) for i in self.jvp),
            *((f"{i.name} [hvp]", i) for i in self.hvp),
        ]


@dataclass
class Rival:
    """An explanation that fits some cases of a root cause alone, and the case that rules
    it out (None when no case of the run tells the two apart)."""

    label: str  # "fault:broadcast.no-reduce", "op-vjp tanh argument 0 (zero)"
    ruled_out_by: str | None


@dataclass
class RootCause:
    """SPEC §6.2: one explanation of several failing cases, said once for the run."""

    hint: Hint
    cases: list[str]  # `CaseResult.id`s
    rivals: list[Rival] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hint": self.hint.to_dict(),
            "cases": list(self.cases),
            "rivals": [{"label": r.label, "ruled_out_by": r.ruled_out_by} for r in self.rivals],
        }


@dataclass
class OpRecord:
    """How an engine fared with one op over a run (the report card, SPEC §6.2): cases that
    use the op and passed; failed with the op found wrong (`mechanisms`: what was found,
    with how many cases); failed with the fault found elsewhere; skipped for lack of it."""

    passed: int = 0
    failed: int = 0
    failed_elsewhere: int = 0
    unsupported: int = 0
    mechanisms: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "failed_elsewhere": self.failed_elsewhere,
            "unsupported": self.unsupported,
            "mechanisms": dict(self.mechanisms),
        }


@dataclass
class RunResult:
    engine: str
    reference: str
    cases: list[CaseResult]
    duration_s: float
    # The run's diagnosis (SPEC §6.2), made from the cases once they are all checked.
    root_causes: list[RootCause] = field(default_factory=list)
    ops: dict[str, OpRecord] = field(default_factory=dict)
    interrupted: str | None = None  # the signal that stopped the run ("SIGINT", "SIGTERM")
    engine_origin: str | None = None  # where it was set: "--engine", "pyproject.toml", "default"
    config: str | None = None  # the config file read ("../pyproject.toml"); None: none
    fail_fast: bool = False  # -x stopped the run at a failure: the cases after it are `not run`
    deselected: int = 0  # cases -k left out
    nothing_found: str | None = None  # why no case was selected or found, when none was
    # TensorFlow's one-off import, when this run waited for it: not in `duration_s`.
    startup_s: float = 0.0
    # The engine's and TensorFlow's threads while both run (`runner.threads`), for --verbose.
    threads: str | None = None

    def count(self, status: str) -> int:
        return sum(1 for c in self.cases if c.status == status)

    @property
    def summary(self) -> dict[str, Any]:
        counts = {s.replace(" ", "_"): self.count(s) for s in STATUSES}
        return {
            **counts,
            "interrupted": self.interrupted,
            "deselected": self.deselected,
            "duration_s": round(self.duration_s, 3),
            "startup_s": round(self.startup_s, 3),
            "root_causes": [cause.to_dict() for cause in self.root_causes],
            "ops": {op: record.to_dict() for op, record in self.ops.items()},
        }

    def root_cause_of(self, case: CaseResult) -> tuple[int, RootCause] | None:
        """The run's root cause that explains `case` (numbered from 1), if any: of a case
        with several, the one its top hint names."""
        found = [(n, c) for n, c in enumerate(self.root_causes, 1) if case.id in c.cases]
        top = case.hints[0].cause if case.hints else None
        return next((f for f in found if f[1].hint.cause == top), found[0] if found else None)

    @property
    def nothing_checked(self) -> bool:
        """Cases ran, and not one had its gradients compared: each was skipped (or with
        --strict failed) as unsupported. SPEC §5: the summary says so."""
        ran = [c for c in self.cases if c.status not in ("invalid", "not run")]
        return bool(ran) and all(
            c.status in ("skipped", "failed") and c.forward is None for c in ran
        )

    @property
    def exit_code(self) -> int:
        """SPEC §5: 2 for an invalid case file, else 1 for any failure or error, else 5
        when no case was selected or found, else 0.

        Computed from the cases' reports alone, so nothing an engine does sets it. A run
        stopped by SIGINT or SIGTERM exits 130 or 143 whatever it found before.
        """
        if self.interrupted:
            return SIGNAL_EXIT.get(self.interrupted, 1)
        if self.count("invalid"):
            return 2
        if self.count("failed") or self.count("error"):
            return 1
        if not self.cases:
            return EXIT_NOTHING
        return 0
