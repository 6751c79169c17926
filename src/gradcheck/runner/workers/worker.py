"""A worker process: imports the engine once, then runs cases and diagnoses sent to it.

Started by `runner.workers.pool` as ``python -c ...`` with three file descriptors: requests
in, replies out, and a page of shared memory where it writes what its engine is doing
(so the parent can say where it hung or died). Its stdout and stderr are the parent's
capture pipe. It runs in a session of its own (a terminal's Ctrl-C is the parent's to
handle), dies with the parent (Linux), and exits at once, leftover threads or not,
when the parent closes the request pipe.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import mmap
import os
import signal
import struct
import sys
from collections.abc import Callable
from typing import Any

from .reaping import become_subreaper

PHASE_BYTES = 4096
_LENGTH = struct.Struct("<I")
_PR_SET_PDEATHSIG = 1


class Phase:
    """What the engine is doing now, written where the parent can read it at any time."""

    def __init__(self, fd: int) -> None:
        self.map = mmap.mmap(fd, PHASE_BYTES)
        self.stage = ""  # "" while running the case, " while diagnosing" after

    def call(self, what: str) -> None:
        """The driver is about to call the engine: `what` is a method or a node."""
        self.set(f"{what}()" if what.isidentifier() else what)

    def set(self, text: str) -> None:
        data = (text + self.stage).encode(errors="replace")[: PHASE_BYTES - _LENGTH.size]
        self.map[_LENGTH.size : _LENGTH.size + len(data)] = data
        self.map[: _LENGTH.size] = _LENGTH.pack(len(data))


def read_phase(memory: mmap.mmap) -> str:
    (length,) = _LENGTH.unpack(memory[: _LENGTH.size])
    return memory[_LENGTH.size : _LENGTH.size + length].decode(errors="replace")


def main() -> None:
    requests, replies, phase_fd = (int(arg) for arg in sys.argv[1:4])
    _detach()
    from .channel import Receiver, encode_reply, send, unpickle

    phase = Phase(phase_fd)
    receiver = Receiver(requests, unpickle)

    def read() -> Any:
        try:
            return receiver.read()
        except EOFError:  # the parent is done with us: leave now, whatever threads remain
            os._exit(0)

    init = read()
    phase.set("importing the engine")
    factory, reply = _start(init)
    send(replies, encode_reply(reply))
    if factory is None:
        os._exit(1)
    _serve(read, lambda message: send(replies, encode_reply(message)), factory, phase)


def _detach() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # Linux: die with the parent, even when hung
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    become_subreaper()  # the engine's setsid() children stay ours to kill
    faulthandler.enable(all_threads=True)  # a crash leaves its traceback in the capture


def _start(init: Any) -> tuple[Callable[[], Any] | None, Any]:
    """The engine factory and the `Ready` reply, or None and `InitFailed` saying why."""
    from ...diagnosis.mechanisms.conventions import declared_conventions
    from ...engines.driver import describe
    from ...engines.loading import engine_name, load_engine
    from ...errors import GradcheckError
    from ...ops.user import load_ops_files
    from .messages import InitFailed, Ready

    sys.path[:] = list(init.sys_path) or sys.path
    try:
        load_ops_files(init.imports)  # the run's user-defined ops, before any case arrives
        factory = load_engine(init.engine, init.named)
        return factory, Ready(engine_name(factory), declared_conventions(factory))
    except GradcheckError as e:
        return None, InitFailed(str(e))
    except BaseException as e:  # SystemExit or anything else the engine's module raised
        return None, InitFailed(f"{init.named}: importing it raised {describe(e)}")


def _serve(
    read: Callable[[], Any],
    reply: Callable[[Any], None],
    factory: Callable[[], Any],
    phase: Phase,
) -> None:
    from ...checking.diagnosis_step import Diagnose, diagnosis_step
    from ...checking.engine_step import EngineOutcome, engine_step
    from ...engines.driver import describe, listen_to_calls
    from ...util.deadline import TimedOut, before, interrupted_after, timed_out
    from .messages import Diagnosed, Release, RunCase

    listen_to_calls(phase.call)
    last: tuple[Any, Any] | None = None  # the case run last and its outcome, for Diagnose
    while True:
        message = read()
        with contextlib.suppress(OSError, AttributeError):
            os.chdir(message.cwd)  # an engine may have moved it; relative paths are the run's
        if isinstance(message, RunCase):
            last = None
            phase.stage = ""
            phase.set("starting the case")
            try:
                # Interrupted before the parent's deadline kills this worker, a looping
                # rule is an engine error with its line, and gets diagnosed (`hangs`).
                limit = before(message.timeout) if message.timeout else None
                with _threads_limited(message.threads), interrupted_after(limit):
                    outcome = engine_step(
                        message.case, factory, ask_twice=message.ask_twice, checks=message.checks
                    )
            except BaseException as e:  # KeyboardInterrupt from an engine's thread, say
                outcome = EngineOutcome(error=f"the engine raised {describe(e)}")
            if limit and outcome.error and f"raised {TimedOut.__name__}:" in outcome.error:
                # Its traceback kept: where the engine was when it was stopped.
                stopped = f" (stopped at {limit:.2g} s, to say where it was)"
                outcome.error = timed_out(message.timeout, outcome.what) + stopped
            _flush()
            last = message.case, outcome
            reply(outcome)
        elif isinstance(message, Diagnose):
            phase.stage = " while diagnosing"
            try:
                if last is None:
                    raise RuntimeError("the worker holds no case to diagnose")
                case, outcome = last
                notes = diagnosis_step(case, outcome, factory, message)
            except BaseException as e:
                notes = [f"diagnosis stopped: {describe(e)}"]
            _flush()
            reply(Diagnosed(message.result, notes))
        elif isinstance(message, Release) and last is not None:
            last[0].release()
            last = None


_controller: Any = None  # threadpoolctl's view of the BLAS and OpenMP libraries loaded


def _threads_limited(threads: int | None) -> contextlib.AbstractContextManager[Any]:
    """The engine's BLAS and OpenMP pools at `threads` while the case's engine step runs
    and the parent computes its reference (`runner.threads`); None: as they are."""
    global _controller
    if threads is None:
        return contextlib.nullcontext()
    if _controller is None:  # once: finding the libraries takes milliseconds
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller.limit(limits=threads)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
