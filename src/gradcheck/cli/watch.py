"""`run --watch` and `check --watch`: check, then check again on every save.

TensorFlow stays imported in this process and the engine's worker stays up between
rounds (one `Checker`), so a round costs what its cases cost. Saving a case file re-runs
that file's cases; saving the engine's file, a file beside it that it imports, or an
`--ops` file restarts the worker (a fresh import), reloads the ops files here, and
re-runs every case. Each round prints one line per case that did not pass (its top
hint), the round's summary and a waiting line, each cut to 80 columns. `q` (or Ctrl-C)
while waiting ends it with the exit code of every case's latest verdict, as one run of
them all would; Ctrl-C during a round stops it as it stops `run` (exit 130).

Nothing in a round stops the watch: a syntax error in a case, engine or ops file, a
deleted file and an engine that hangs (its timeout applies each round) are reported in
the round, and the next save retries. Files are watched with `watchfiles`, through
their folders, so that an editor's save by rename is seen.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from ..cases.loader import Collected
from ..cases.model import Case
from ..errors import GradcheckError
from ..results import SIGNAL_EXIT, CaseResult, RunResult
from ..runner import Checker, RunOptions
from ..runner import run as run_cases
from ..util import interrupts
from ..util.modules import local_imports

WIDTH = 80
CASE_SUFFIXES = (".yaml", ".yml")
Gather = Callable[[list[Path] | None], Collected]  # these case files' cases (None: all)


class Watch:
    """The watch's state: the engine side kept between rounds, each file's latest results."""

    def __init__(
        self, gather: Gather, engine: str, options: RunOptions, *, cases: list[Path],
        engine_file: Path | None, ops: list[Path], echo: Callable[[str], None],
    ) -> None:  # fmt: skip
        self.gather, self.engine, self.options, self.echo = gather, engine, options, echo
        self.cases = [path.resolve() for path in cases]
        self.ops = [path.resolve() for path in ops]
        self.engine_file = engine_file.resolve() if engine_file else None
        self.engine_files = local_imports(self.engine_file) if self.engine_file else set()
        self.checker: Checker | None = None
        self.latest: dict[Path, list[CaseResult]] = {}  # by case file
        self.rounds = 0
        self.interrupted: str | None = None  # the signal that stopped a round

    # -- what a save asks for ------------------------------------------------------

    def folders(self) -> list[Path]:
        """What watchfiles watches: the case folders, and the folders holding the files."""
        files = [*self.engine_files, *self.ops, *(p for p in self.cases if not p.is_dir())]
        folders = {p for p in self.cases if p.is_dir()} | {p.parent for p in files}
        return sorted(p for p in folders if p.is_dir()) or [Path.cwd()]

    def is_watched(self, path: Path) -> bool:
        return self.restarts(path) or self.is_case_file(path)

    def restarts(self, path: Path) -> bool:
        return path in self.engine_files or path in self.ops

    def is_case_file(self, path: Path) -> bool:
        return path in self.cases or (
            path.suffix in CASE_SUFFIXES
            and any(path.is_relative_to(folder) for folder in self.cases)
        )

    def changed(self, paths: set[Path]) -> None:
        """One round for what was saved together: every case if the engine or ops changed."""
        restart = sorted(p for p in paths if self.restarts(p))
        if restart:
            self.run_round(f"{_names(restart)} changed: the engine restarts", None, restart=True)
            return
        cases = sorted(p for p in paths if self.is_case_file(p))
        for gone in (p for p in cases if not p.exists()):
            self.latest.pop(gone, None)
        present = [_shown(p) for p in cases if p.exists()]
        if present:
            self.run_round(f"{_names(present)} changed", present)
        elif cases:
            self.rounds += 1
            self.echo(_cut(f"-- round {self.rounds}: {_names(cases)} deleted, its cases gone"))

    # -- a round -------------------------------------------------------------------

    def run_round(self, why: str, files: list[Path] | None, *, restart: bool = False) -> None:
        self.rounds += 1
        self.echo(_cut(f"-- round {self.rounds}: {why}"))
        try:
            if restart:
                self.restart()
            collected = self.gather(files)
            if self.checker is None and any(isinstance(i, Case) for i in collected.items):
                self.checker = Checker(self.engine, self.options)
            result = run_cases(collected, self.engine, self.options, checker=self.checker)
        except GradcheckError as e:  # a broken engine, ops or case file: the next save retries
            self.close()
            self.echo(_cut(f"error: {e}".splitlines()[0]))
            return
        for file in [f.resolve() for f in files] if files is not None else list(self.latest):
            self.latest.pop(file, None)
        for case in result.cases:
            self.latest.setdefault(Path(case.file).resolve(), []).append(case)
        for case in result.cases:
            if not case.passed:
                self.echo(_cut(f"{case.status.upper()} {case.id}  {_headline(case)}"))
        self.echo(_cut(_summary(result)))
        self.interrupted = result.interrupted

    def restart(self) -> None:
        """A fresh engine worker, the ops files imported again, the engine's imports re-read."""
        from ..ops.user import forget_ops_files, load_ops_files

        self.close()
        if self.engine_file:
            self.engine_files = local_imports(self.engine_file)
        forget_ops_files(self.ops)
        load_ops_files(self.ops)

    def wait_line(self) -> None:
        code = self.exit_code()
        self.echo(_cut(f"waiting for a save (exit code {code} so far); q or Ctrl-C quits"))

    def exit_code(self) -> int:
        """Every case's latest verdict, as one run of them all would exit."""
        if self.interrupted:
            return SIGNAL_EXIT.get(self.interrupted, 1)
        cases = [case for results in self.latest.values() for case in results]
        return RunResult(engine=self.engine, reference="", cases=cases, duration_s=0).exit_code

    def close(self) -> None:
        if self.checker is not None:
            self.checker.close()
            self.checker = None


def watch(session: Watch) -> int:
    """The first round, then a round per save, until q or Ctrl-C; the exit code."""
    import watchfiles

    stop = threading.Event()
    try:
        with _keys(stop), interrupts.handled():
            session.run_round("every case", None)
            while not stop.is_set() and not session.interrupted:
                folders = session.folders()
                waiting = False
                for changes in watchfiles.watch(
                    *folders,
                    watch_filter=lambda _, path: session.is_watched(Path(path)),
                    stop_event=stop,
                    step=20,  # ms without events that end a save's burst of them
                    rust_timeout=100,  # ms: an empty yield says the watcher is ready
                    yield_on_timeout=True,
                ):
                    if not changes:
                        if not waiting:  # once watching: a save from now on is seen
                            session.wait_line()
                            waiting = True
                        continue
                    session.changed({Path(path) for _, path in changes})
                    waiting = False
                    if session.interrupted or session.folders() != folders:
                        break
    except (interrupts.Interrupted, KeyboardInterrupt):
        pass  # while waiting: the latest verdicts' exit code
    finally:
        session.close()
    return session.exit_code()


@contextlib.contextmanager
def _keys(stop: threading.Event) -> Iterator[None]:
    """`q` sets `stop`: at once on a terminal (cbreak mode, restored after), else a line."""
    stdin = sys.stdin
    terminal = stdin is not None and stdin.isatty()
    restore = None
    if terminal:
        import termios
        import tty

        fd = stdin.fileno()
        restore = termios.tcgetattr(fd)
        tty.setcbreak(fd)

    def read() -> None:
        with contextlib.suppress(OSError, ValueError):
            while True:
                text = os.read(stdin.fileno(), 1 if terminal else 1024)
                if not text:
                    return  # stdin closed (no terminal): only Ctrl-C ends the watch
                if b"q" in text.lower():
                    stop.set()
                    return

    if stdin is not None:
        threading.Thread(target=read, name="gradcheck-keys", daemon=True).start()
    try:
        yield
    finally:
        if restore is not None:
            import termios

            termios.tcsetattr(stdin.fileno(), termios.TCSADRAIN, restore)


def _headline(case: CaseResult) -> str:
    from ..report.rich_report import headline

    return " ".join(headline(case).split())


def _summary(result: RunResult) -> str:
    from ..report.rich_report import summary_line

    return " ".join(summary_line(result).split())


def _shown(path: Path) -> Path:
    """A path as the user would write it: from the working directory, where it is under it."""
    with contextlib.suppress(ValueError):
        return path.relative_to(Path.cwd())
    return path


def _names(paths: list[Path]) -> str:
    return ", ".join(path.name for path in paths)


def _cut(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 3] + "..."
