"""A correct engine (the builtin one) that misbehaves on cue: for the isolation tests.

What it does wrong depends on the names of the case's inputs, so that one case file can
hold one case per misbehaviour, each beside well-behaved neighbours:

* ``exit0``: ``os._exit(0)`` in grad; ``sysexit``: ``sys.exit(3)`` in grad;
* ``segv``: a segfault (through ctypes) in grad; ``hang``: sleeps forever in grad;
* ``oom``: kills itself with SIGKILL in grad, as the out-of-memory killer would;
* ``thread``: leaves a non-daemon thread that never ends, and answers correctly;
* ``chdir``: moves the working directory elsewhere, and answers correctly;
* ``cplx``: adds 1000j to its gradients; ``badstr``: raises an exception whose
  ``__str__`` raises;
* ``chatty``: prints to stdout, stderr and file descriptor 1 (with the sha256 of the
  input it got), and answers correctly;
* ``scribble``: writes zeros into the input arrays it was given, after answering;
* ``marked``: creates the file named by $HOSTILE_MARK (its pid inside) and then
  sleeps: a test waits for the file, then signals the run.

`DiesDiagnosing` gives wrong gradients (doubled) and segfaults once diagnosis probes a
node alone (localisation names that node's inputs ``a0``, ``a1``...).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import signal
import sys
import threading
import time

import numpy as np

from gradcheck.engines.builtin.engine import BuiltinEngine


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


def _segfault() -> None:
    ctypes.string_at(0)


class Engine(BuiltinEngine):
    name = "hostile"

    def __init__(self) -> None:
        self.names: list[str] = []
        self.given: list[np.ndarray] = []

    def leaf(self, name, value):
        self.names.append(name)
        self.given.append(value)
        if name == "chatty":
            digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
            print(f"leaf {name} sha256 {digest}")
        return super().leaf(name, value)

    def grad(self, output, wrt, cotangent):
        names = set(self.names)
        if "exit0" in names:
            os._exit(0)
        if "sysexit" in names:
            sys.exit(3)
        if "segv" in names:
            _segfault()
        if "oom" in names:
            os.kill(os.getpid(), signal.SIGKILL)
        if "hang" in names:
            while True:
                time.sleep(1)
        if "marked" in names:
            with open(os.environ["HOSTILE_MARK"], "w") as mark:
                mark.write(str(os.getpid()))
            while True:
                time.sleep(1)
        if "badstr" in names:
            raise Unprintable()
        if "thread" in names:
            threading.Thread(target=lambda: time.sleep(3600), daemon=False).start()
        if "chdir" in names:
            os.chdir("/")
        if "chatty" in names:
            print("to stdout")
            print("to stderr", file=sys.stderr)
            os.write(1, b"to fd 1\n")
        grads = super().grad(output, wrt, cotangent)
        if "scribble" in names:
            for value in self.given:
                value[...] = 0  # the arrays it was handed: gradcheck's own must not change
        if "cplx" in names:
            return [g + 1000j for g in grads]
        return grads


class DiesDiagnosing(Engine):
    """Wrong gradients; a segfault once diagnosis probes a node alone (leaves a0, a1)."""

    def grad(self, output, wrt, cotangent):
        if "a0" in self.names:
            _segfault()
        return [2 * g for g in super().grad(output, wrt, cotangent)]
