"""Every process a worker started, killed with it, `setsid()` or not.

A worker runs in a process group of its own, killed whole; but an engine's child that
calls `setsid()` (a server it starts, `subprocess.Popen(start_new_session=True)`) leaves
that group and would outlive the run. On Linux the worker is therefore a child
subreaper (an orphan below it is re-parented to it, not to init, so it stays its
descendant), and killing a worker kills its descendants, found through /proc. Elsewhere
the process group alone is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

_PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 10  # of looking again: a descendant may fork while the others are killed


def become_subreaper() -> None:
    """This process adopts its descendants' orphans (Linux; elsewhere nothing)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def kill_tree(pid: int, *, descendants: bool) -> None:
    """SIGKILL every live descendant of `pid` (when `descendants`: only while `pid` is
    unreaped, else the pid may be another process's), then `pid`'s process group: the
    worker last, so that it holds the orphans until they are gone."""
    for _ in range(_ROUNDS if descendants else 0):
        found = live_descendants(pid)
        if not found:
            break
        for child in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def live_descendants(pid: int) -> list[int]:
    """The live (not zombie) processes below `pid`, from /proc; [] without /proc."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # it ended meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        state, ppid = stat[stat.rindex(b")") + 2 :].split()[:2]
        if state != b"Z":
            children.setdefault(int(ppid), []).append(int(entry))
    found, stack = [], list(children.get(pid, []))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(children.get(child, []))
    return found
