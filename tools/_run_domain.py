"""A judged run's processes as the worker's PID namespace holds them: what a run spent, and what
it left behind cleared before anything else runs.

A worker with a PID namespace of its own is its init (pid 1): every process a run starts stays
in that namespace, whatever it does to leave the run's process group or tree (a double fork, a
child of a thread, ``setsid``), and ``/proc`` shows no other. So where that holds
(``contained``), a run of ``code_eval`` (the only thing running, beside the problem's interactor)
is accounted as the whole namespace but the worker and the spared (``namespace_usage``): its
CPU time and memory limits cannot be escaped by moving work out of its tree. And after each
run, before a checker runs or the next case starts, everything it left is killed and reaped and
the System V IPC objects it made are removed (``sweep``): nothing of one case reaches the next,
nor can hold a checker's pipe, its processes or its disk. Without a PID namespace of its own
(the namespace layer off) neither holds: a run is its process tree, and what escapes it is
bounded by the wall-clock limit and killed with the call.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Iterable

from a2e_engine.tools._tree_usage import TreeUsage, descendants, usage_of

__all__ = ["contained", "namespace_usage", "sweep"]

#: ``IPC_RMID``, for ``shmctl``, ``msgctl`` and ``semctl``.
_IPC_RMID = 0


def contained() -> bool:
    """Whether this process is the init of a PID namespace of its own."""
    return os.getpid() == 1


def namespace_usage(spared: Iterable[int] = (), memory: bool = True, cpu: bool = True) -> TreeUsage:
    """What every process of the namespace has used, but this one and the trees of ``spared``."""
    return usage_of(_others(spared), memory, cpu)


def sweep(spared: Iterable[int] = ()) -> None:
    """Kill every process of the namespace but this one and the trees of ``spared``, reap those
    that are this process's children (orphans come to it), and remove the System V IPC objects
    of the namespace. Nothing where this is not a namespace's init. A child the caller will
    reap itself must be reaped first, or spared."""
    if not contained():
        return
    spared = list(spared)
    for pid in _others(spared):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    keep = {pid for root in spared for pid in descendants(root)}
    for pid in _children():
        if pid not in keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    _remove_ipc()


def _others(spared: Iterable[int]) -> list[int]:
    keep = {os.getpid(), *(pid for root in spared for pid in descendants(root))}
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in keep:
            pids.append(int(name))
    return pids


def _children() -> list[int]:
    me = os.getpid()
    children: list[int] = []
    with contextlib.suppress(OSError):
        for thread in os.listdir(f"/proc/{me}/task"):
            path = f"/proc/{me}/task/{thread}/children"
            with contextlib.suppress(OSError, ValueError), open(path, "rb") as fh:
                children.extend(int(child) for child in fh.read().split())
    return children


def _remove_ipc() -> None:
    """Every shared memory segment, message queue and semaphore set of the IPC namespace
    removed: a run could leave one for the next (Landlock does not cover System V IPC)."""
    libc = _libc()
    for kind, remove in (("shm", libc.shmctl), ("msg", libc.msgctl), ("sem", libc.semctl)):
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 1 and fields[1].isdigit():
                if kind == "sem":
                    remove(int(fields[1]), 0, _IPC_RMID)
                else:
                    remove(int(fields[1]), _IPC_RMID, None)


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    """The C library this process has loaded already (no search for it: none is needed)."""
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]
