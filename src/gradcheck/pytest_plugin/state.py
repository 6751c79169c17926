"""What one pytest session's gradcheck settings resolve to (`State`, in the config's
stash): which files are case files, the engine (loaded, or its workers started, once for
the session) and the run options every item shares."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import GradcheckError
from .options import settings_of

if TYPE_CHECKING:
    from ..cases import Case
    from ..config import Settings
    from ..engines.protocol import EngineFactory
    from ..results import CaseResult
    from ..runner import RunOptions


class EngineUnavailable(Exception):
    """`--gradcheck-engine` names no usable engine: every item fails with this message."""


@dataclass
class State:
    """What one pytest session's gradcheck settings resolve to."""

    roots: list[Path]
    settings: Settings
    strict: bool = False
    fuzz_examples: int = 0  # 0: no gradcheck-fuzz item
    fuzz_seed: int = 0
    fuzz_ops: list[str] | None = None
    fuzz_out: Path | None = None
    isolate: str | None = None
    shard: tuple[int, int] | None = None  # --gradcheck-shard's (K, N)
    _engine: Any = field(default=None, repr=False)  # the factory, or the UsageError (fuzz)
    _checker: Any = field(default=None, repr=False)  # the Checker, or EngineUnavailable

    @property
    def engine_spec(self) -> str:
        return self.settings.engine

    def covers(self, path: Path) -> bool:
        path = _absolute(path)
        return any(path == root or root in path.parents for root in self.roots)

    def engine(self) -> EngineFactory:
        """The engine factory, loaded in this process once per session (the fuzz item's)."""
        if self._engine is None:
            from ..engines.loading import load_engine

            try:
                self._engine = load_engine(self.engine_spec, self.settings.engine_named())
            except GradcheckError as e:
                self._engine = EngineUnavailable(f"gradcheck: {e}")
        if isinstance(self._engine, EngineUnavailable):
            raise self._engine
        return self._engine

    def check(self, case: Case) -> CaseResult:
        """Check `case` with the session's engine, loaded (or its workers started) at the
        first item that runs; every item fails with the same message if it cannot be."""

        if isinstance(self._checker, EngineUnavailable):
            raise self._checker
        try:
            if self._checker is None:
                from ..runner import Checker

                self._checker = Checker(self.engine_spec, self.options)
            return self._checker.check(case)
        except GradcheckError as e:
            self.close()
            self._checker = EngineUnavailable(f"gradcheck: {e}")
            raise self._checker from None

    def close(self) -> None:
        if self._checker is not None and not isinstance(self._checker, EngineUnavailable):
            self._checker.close()
            self._checker = None

    @cached_property
    def options(self) -> RunOptions:
        """Made once per session: one reference cache, so one warning at most."""
        return self.settings.run_options(self.engine_spec, strict=self.strict, isolate=self.isolate)


STATE = pytest.StashKey[State]()


def configured(config: pytest.Config) -> State:
    """The session's state, from its options, ini file and gradcheck's config file."""
    from ..config import DEFAULTS

    invocation_dir = config.invocation_params.dir
    explicit = config.args_source == pytest.Config.ArgsSource.ARGS
    ini_paths = [_absolute(Path(p)) for p in config.getini("gradcheck_paths")]
    fuzz = config.getoption("gradcheck_fuzz")
    fuzz_examples = int(config.getini("gradcheck_fuzz") or 0) if fuzz is None else fuzz
    on = config.getoption("gradcheck") or bool(ini_paths) or fuzz_examples > 0
    settings = settings_of(config, ini_paths) if on else DEFAULTS  # off: no file is read
    roots = list(ini_paths)
    if config.getoption("gradcheck") and explicit:
        roots += [_absolute(invocation_dir / arg.split("::")[0]) for arg in config.args]
    elif config.getoption("gradcheck") and not ini_paths:
        roots += [_absolute(path) for path in settings.paths]  # the config file's, else cases/
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        # No paths on the command line: the case folders join `testpaths`.
        args = [_absolute(invocation_dir / arg) for arg in config.args]
        for root in roots:
            if root.exists() and not any(root == a or a in root.parents for a in args):
                config.args.append(str(root))
                args.append(root)
    if on and settings.ops:
        _load_ops(list(settings.ops))
    fuzz_out = config.getoption("gradcheck_fuzz_out")
    shard = config.getoption("gradcheck_shard")
    return State(
        roots=roots,
        settings=settings,
        strict=config.getoption("gradcheck_strict"),
        fuzz_examples=fuzz_examples,
        fuzz_seed=config.getoption("gradcheck_fuzz_seed"),
        fuzz_ops=config.getini("gradcheck_fuzz_ops") or None,
        fuzz_out=invocation_dir / fuzz_out if fuzz_out else None,
        isolate=config.getoption("gradcheck_isolate"),
        shard=_shard(shard) if shard is not None else None,
    )


def _shard(text: str) -> tuple[int, int]:
    from ..runner.shards import parse_shard

    try:
        return parse_shard(text)
    except GradcheckError as e:
        raise pytest.UsageError(
            f"gradcheck: {str(e).replace('--shard', '--gradcheck-shard', 1)}"
        ) from None


def _load_ops(paths: list[Path]) -> None:
    from ..ops.user import load_ops_files

    try:
        load_ops_files(paths)
    except GradcheckError as e:
        message = str(e).replace("--ops", "--gradcheck-ops", 1)
        raise pytest.UsageError(f"gradcheck: {message}") from None


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))
