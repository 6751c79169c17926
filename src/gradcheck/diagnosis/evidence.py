"""What the diagnosis of one failing case starts from."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cases.model import Case
from ..engines.builtin.engine import BuiltinEngine
from ..engines.driver import EngineFailure, EngineRun
from ..engines.protocol import EngineFactory, framework_driver
from ..results import CaseResult, Hint
from . import idiom
from .mechanisms import dtypes


@dataclass
class Evidence:
    """Everything known about one failing case."""

    case: Case
    reference: EngineRun
    engine: EngineRun | None  # None when the engine raised: `failure` says what
    result: CaseResult
    engine_factory: EngineFactory
    stale: list[str] = field(default_factory=list)
    failure: EngineFailure | None = None
    conventions: dict[str, str] = field(default_factory=dict)  # declared by the adapter
    # The faults that reproduce a failing node alone; None until localisation has run.
    node_faults: set[str] | None = None
    # The driver localisation's finding, once made (`driver.py`): a driver fingerprint
    # then says nothing more.
    driver: Hint | None = None
    # The run's causes so far, each with the case it was found on (`root_causes.known`):
    # one that raises here as the engine does explains an error; and when `brief`
    # (`--diagnose=first`), one that reproduces this case spares it the probes.
    known: list[tuple[Hint, str]] = field(default_factory=list)
    brief: bool = True
    timeout: float | None = None  # the case's: a case that timed out checks nodes within it

    def builtin(self) -> BuiltinEngine:
        """The builtin engine that stands for the right answer: TensorFlow's conventions,
        except those the adapter declares."""
        return BuiltinEngine(self.conventions)

    @property
    def rounding(self) -> str:
        """The dtype whose rounding a difference may be: the less precise of the case's
        and the engine's."""
        return dtypes.judging_dtype(self.engine.dtype if self.engine else None, self.case.dtype)

    @property
    def spelling(self) -> str:
        return idiom.engine_spelling(self.engine_factory, self.engine)

    @property
    def own_driver(self) -> bool:
        """Whether the engine walks its own graph, so its driver may be the bug: not when
        its backward pass is a framework's (SPEC §6.1)."""
        return framework_driver(self.engine_factory) is None


@dataclass
class ModeEvidence:
    """What the diagnosis of forward mode (`diagnosis.modes.forward`) or second order
    (`diagnosis.modes.second_order`) starts from: the engine's run, or what it raised."""

    case: Case
    engine_factory: EngineFactory
    reference: EngineRun  # with its `jvp` and `hvp` runs
    result: CaseResult
    got: EngineRun | None  # None when the engine raised: `failure` says what
    failure: EngineFailure | None = None

    @property
    def spelling(self) -> str:
        return idiom.engine_spelling(self.engine_factory, self.got)
