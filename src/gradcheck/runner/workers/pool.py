"""Worker processes: where user engines run, so that nothing they do can end the run.

A `WorkerPool` keeps a long-lived worker, a fresh interpreter (started, never forked:
gradcheck's process may hold TensorFlow's threads) that imports the engine once and then
gets cases one at a time. Each request has a deadline; while waiting, the pool reads the
worker's replies and its output as they come, so a flood of prints cannot stall it.

A worker that exits, is killed by a signal (a segfault, the out-of-memory killer) or
misses its deadline is killed with everything it started (its process group) and
replaced by a fresh one; the request it was serving gets `WorkerLost`, saying what
happened and what the engine was doing ("the engine process was killed by SIGSEGV
during grad()"), with what the engine printed before. A worker that cannot import the
engine makes `EngineUnavailable`, a usage error.

POSIX only (pipes, process groups); gradcheck runs engines in its own process elsewhere.
"""

from __future__ import annotations

import atexit
import contextlib
import mmap
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ...util.deadline import timed_out
from .capture import Capture
from .channel import Receiver, encode, read_reply, write_some
from .messages import InitFailed, Ready, WorkerInit
from .reaping import kill_tree
from .worker import PHASE_BYTES, read_phase

POLL_S = 0.25  # how often a wait looks for a worker that died silently
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_COMMAND = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from gradcheck.runner.workers.worker import main; main()"
)
SUPPORTED = os.name == "posix"


class WorkerLost(Exception):
    """The worker serving a request died or timed out; `message` says how and where."""

    def __init__(self, message: str, captured: str) -> None:
        super().__init__(message)
        self.message = message
        self.captured = captured


class EngineUnavailable(UsageError):
    """A worker could not import the engine."""


class Worker:
    """One worker process and the request it serves, seen from the parent."""

    def __init__(self, init: WorkerInit, timeout: float) -> None:
        requests_r, self.requests = os.pipe()
        self.replies, replies_w = os.pipe()
        self.output, output_w = os.pipe()
        self._phase_file = tempfile.TemporaryFile()  # noqa: SIM115  (closed by close())
        self._phase_file.truncate(PHASE_BYTES)
        phase_fd = self._phase_file.fileno()
        self.phase = mmap.mmap(phase_fd, PHASE_BYTES)
        fds = (requests_r, replies_w, phase_fd)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-u", "-c", _COMMAND, _PACKAGE_ROOT, *map(str, fds)],
                stdin=subprocess.DEVNULL,
                stdout=output_w,
                stderr=output_w,
                pass_fds=fds,
                start_new_session=True,  # its own process group: killed whole, deaf to ^C
            )
        finally:
            for fd in (requests_r, replies_w, output_w):
                os.close(fd)
        for fd in (self.requests, self.replies, self.output):
            os.set_blocking(fd, False)
        self.receiver = Receiver(self.replies, read_reply)
        self.capture = Capture()
        self.engine: str | None = None  # its name, once it is ready
        self.conventions: dict[str, str] = {}
        self.pending: list[memoryview] = []
        self.reply: Any = Receiver.NOTHING
        self.lost: WorkerLost | None = None
        self.unavailable: EngineUnavailable | None = None
        self.busy = False
        self.output_open = True
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout  # for the import, then for each request
        self.pending = encode(init)
        self.named = init.named

    # -- requests --------------------------------------------------------------------

    def request(self, message: Any, timeout: float) -> None:
        self.read_output()
        self.capture.clear()  # what leftover threads printed between requests is no case's
        self.pending += encode(message)
        self.reply = Receiver.NOTHING
        self.busy = True
        self.timeout = timeout
        if self.engine is not None:
            self.deadline = time.monotonic() + timeout
        with contextlib.suppress(OSError):
            self.write()  # most requests fit the pipe: no wait for the poll to say so

    def done(self) -> bool:
        return (
            self.reply is not Receiver.NOTHING
            or self.lost is not None
            or self.unavailable is not None
        )

    def result(self) -> Any:
        """The reply to the request, the output it came with; `WorkerLost` if none came."""
        self.busy = False
        if self.unavailable is not None:
            raise self.unavailable
        if self.lost is not None:
            raise self.lost
        reply, self.reply = self.reply, Receiver.NOTHING
        return reply

    # -- events ----------------------------------------------------------------------

    def interest(self) -> list[tuple[int, int]]:
        """(fd, poll events) this worker waits for."""
        events = [(self.replies, select.POLLIN)]
        if self.output_open:
            events.append((self.output, select.POLLIN))
        if self.pending:
            events.append((self.requests, select.POLLOUT))
        return events

    def ready(self, fd: int) -> None:
        try:
            if fd == self.requests:
                self.write()
            elif fd == self.replies:
                self.read_replies()
            else:
                self.read_output()
        except (BrokenPipeError, EOFError, OSError):
            self.died()

    def write(self) -> None:
        while self.pending:
            try:
                write_some(self.requests, self.pending)
            except BlockingIOError:
                return

    def read_replies(self) -> None:
        while self.reply is Receiver.NOTHING:
            try:
                message = self.receiver.read()
            except ValueError as e:  # a frame that is no reply (`BadFrame`, `BadReply`)
                self.kill()
                self._lose(f"the engine process sent a reply gradcheck cannot read ({e})")
                return
            if message is Receiver.NOTHING:
                return
            if isinstance(message, Ready):
                self.engine = message.engine
                self.conventions = dict(message.conventions)
                self.deadline = time.monotonic() + self.timeout
            elif isinstance(message, InitFailed):
                self.unavailable = EngineUnavailable(message.message)
                self.kill()
            elif self.busy:
                self.reply = message

    def read_output(self) -> None:
        while self.output_open:
            try:
                data = os.read(self.output, 1 << 16)
            except BlockingIOError:
                return
            if not data:
                self.output_open = False
                return
            self.capture.add(data)

    def check(self, now: float) -> None:
        """Notice a worker that died without closing its pipes, or missed its deadline."""
        if self.done() or (not self.busy and self.engine is not None):
            return
        if self.process.poll() is not None:
            self.died()
        elif now > self.deadline:
            self.kill()
            self._lose(timed_out(self.timeout, None) + _doing(read_phase(self.phase), "in"))

    def died(self) -> None:
        if self.done():
            return
        with contextlib.suppress(OSError, EOFError):
            self.read_replies()  # a reply written just before exiting still counts
        if self.done():
            return
        try:  # its pipe closed: it is exiting, or it closed the pipe and lives on
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is None:
            how = "closed its pipe to gradcheck"
        elif code >= 0:
            how = f"exited with status {code}"
        else:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else -code
            how = f"was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
        self._lose(f"the engine process {how}{_doing(read_phase(self.phase), 'during')}")

    def _lose(self, message: str) -> None:
        self.read_output()
        if self.engine is None:
            captured = self.capture.take().strip()
            detail = f"\n{captured}" if captured else ""
            self.unavailable = EngineUnavailable(f"{self.named}: {message}{detail}")
        else:
            self.lost = WorkerLost(message, self.capture.take())

    def kill(self) -> None:
        kill_tree(self.process.pid, descendants=self.process.poll() is None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def close(self) -> None:
        self.kill()
        for fd in (self.requests, self.replies, self.output):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.phase.close()
        self._phase_file.close()


def _doing(phase: str, preposition: str) -> str:
    """ " during grad()", " while importing the engine": where the engine was."""
    if not phase:
        return ""
    verbs = ("importing", "starting", "creating", "reading")
    return f" while {phase}" if phase.startswith(verbs) else f" {preposition} {phase}"


# Workers a run has finished with, kept for the next run of this process with an equal
# `WorkerInit` (the Python API, the pytest plugin, tests): the engine is imported once.
# Only the newest few: a process that checks many engines (a notebook, a test suite)
# must not gather an idle interpreter per engine.
_KEPT: dict[WorkerInit, Worker] = {}
KEPT_WORKERS = 2


@atexit.register
def _close_kept() -> None:
    for worker in _KEPT.values():
        worker.close()
    _KEPT.clear()


class WorkerPool:
    """The run's worker, started with `init` (or kept from an earlier run), and the one
    that replaces it when it is lost.

    One case at a time: the reference is computed in gradcheck's own process meanwhile,
    so one worker keeps TensorFlow busy unless the engine is much slower than it.
    """

    def __init__(self, init: WorkerInit, *, timeout: float) -> None:
        if not SUPPORTED:
            raise UsageError("--isolate=process needs a POSIX system; use --isolate=none")
        self.init = init
        self.timeout = timeout
        self.worker: Worker | None = None
        self.engine: str | None = None  # the engine's name, once a worker has loaded it
        self.conventions: dict[str, str] = {}  # the conventions its adapter declares

    def start(self) -> Worker:
        """The worker, started now if there is none (its import overlaps what comes next)."""
        if self.worker is None:
            kept = _KEPT.pop(self.init, None)
            if kept is not None and kept.process.poll() is None:
                kept.timeout = self.timeout
                self.worker = kept
            else:
                if kept is not None:
                    kept.close()
                self.worker = self._new()
        return self.worker

    def _new(self) -> Worker:
        try:
            return Worker(self.init, self.timeout)
        except OSError as e:  # no processes or file descriptors left, say
            message = f"{self.init.named}: cannot start a worker process ({e})"
            raise EngineUnavailable(message) from e

    def submit(self, message: Any, timeout: float) -> Worker:
        """Send `message` to the worker (started if need be); `wait` for its reply."""
        worker = self.start()
        if worker.process.poll() is not None:  # it died between requests: no request's fault
            if worker.engine is None:  # it died importing the engine: say so
                worker.check(time.monotonic())
                worker.result()
            worker = self._replace()
        worker.request(message, timeout)
        return worker

    def resubmit(self, worker: Worker, message: Any, timeout: float) -> Worker:
        """A follow-up request to the worker that holds the last case (`Diagnose`)."""
        if worker is not self.worker:
            raise WorkerLost("the engine process serving this case is gone", "")
        worker.request(message, timeout)
        return worker

    def wait(self, worker: Worker) -> tuple[Any, str]:
        """Serve `worker` until it has answered: its reply and its output.

        `WorkerLost` if it died or timed out (a fresh worker starts at once);
        `EngineUnavailable` if it could not import the engine.
        """
        while not worker.done():
            poller = select.poll()
            for fd, events in worker.interest():
                poller.register(fd, events)
            remaining = max(0.0, worker.deadline - time.monotonic())
            for fd, _ in poller.poll(1000 * min(remaining, POLL_S) + 1):
                worker.ready(fd)
            worker.check(time.monotonic())
        if worker.engine is not None:
            self.engine, self.conventions = worker.engine, worker.conventions
        try:
            reply = worker.result()
        except WorkerLost:
            self._replace()
            raise
        worker.read_output()
        return reply, worker.capture.take()

    def release(self, worker: Worker, message: Any) -> None:
        """Tell an idle worker something that needs no answer (`Release`)."""
        if worker is self.worker and not worker.busy:
            worker.pending += encode(message)
            with contextlib.suppress(OSError):
                worker.write()

    def _replace(self) -> Worker:
        if self.worker is not None:
            self.worker.close()
        self.worker = None
        self.worker = self._new()
        return self.worker

    def close(self) -> None:
        """Keep an idle, healthy worker for the next run; close any other."""
        worker, self.worker = self.worker, None
        if worker is None:
            return
        if worker.busy or worker.engine is None or worker.process.poll() is not None:
            worker.close()
            return
        with contextlib.suppress(OSError):
            worker.write()  # its last Release
        previous = _KEPT.pop(self.init, None)
        if previous is not None:
            previous.close()
        _KEPT[self.init] = worker
        while len(_KEPT) > KEPT_WORKERS:  # dicts keep insertion order: the oldest first
            _KEPT.pop(next(iter(_KEPT))).close()
