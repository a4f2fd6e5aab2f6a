"""A program's run as everything it started, not as the process the worker started: what it
spent and held, what ends it, and what is left of it once it is done.

Where the worker has a case group (``sandbox._case_group``: root, cgroup v1 with a freezer), a
run is its group (``CaseDomain``): the program joins it before it executes, so every process it
starts is in it whatever it does (a double fork, ``setsid``, a child that forks and lets its
parent exit in a loop); its CPU time is the group's, exited members included, and its memory
what the group holds (each page once, however many members share it, and memfd and shmem
pages no process maps) or a member's resident high-water mark, whichever is more, the kernel
killing it just past its limit. At the run's end the group
is frozen and emptied (``CaseDomain.end``): nothing of it outlives its step, and the last
reading counts what it spent after the program itself exited.

Without one, where the worker is its PID namespace's init (pid 1: every process a run starts
stays in that namespace), a run of ``code_eval`` (the only thing running, beside an
interactor) is accounted as the whole namespace but the worker and the spared
(``namespace_usage``), and what it left is killed, the namespace listed again until nothing is
left (``sweep``). Without either, a run is its process tree: what escapes it is bounded by the
wall-clock limit and killed with the call.

After each run of a case, the System V IPC objects of the worker's IPC namespace are removed
too (``sweep``): Landlock does not cover them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from a2e_engine.sandbox._case_group import CaseGroup, case_group
from a2e_engine.sandbox._syscalls import libc
from a2e_engine.sandbox._tree_usage import TreeUsage, descendants, usage_of

__all__ = [
    "CaseDomain",
    "CaseEnd",
    "case_domain",
    "children",
    "contained",
    "namespace_usage",
    "sweep",
]

#: ``IPC_RMID``, for ``shmctl``, ``msgctl`` and ``semctl``.
_IPC_RMID = 0
#: How long a sweep without a case group may chase what a run left, and wait for it to go.
_SWEEP_S = 2.0
#: How far above a run's memory limit the kernel's lies, at least (``CaseDomain.begin``).
KERNEL_SLACK_KB = 4 << 10


@dataclass(frozen=True)
class CaseEnd:
    """A run's last figures, once nothing of it is left: its CPU time (None: not counted by
    the group), whether the kernel killed a member for its memory, and whether it is gone."""

    cpu_seconds: float | None
    out_of_memory: bool
    gone: bool


class CaseDomain:
    """One run's case group, from ``begin`` (before it starts) to ``end``."""

    def __init__(self, group: CaseGroup) -> None:
        self.group = group
        self._oom_before = 0

    def begin(self, memory_limit_kb: int | None) -> None:
        """Ready for a run limited to ``memory_limit_kb`` of memory (None: the call's). The
        kernel's limit lies a little above it (``KERNEL_SLACK_KB``), for what it counts that the
        run's own reading does not (page tables, kernel stacks; the page cache it reclaims
        first): the run's limit is judged on its readings, and the kernel's stops, at once,
        what would run past it between two of them."""
        limit = None
        if memory_limit_kb:
            slack_kb = max(KERNEL_SLACK_KB, memory_limit_kb // 32)
            limit = (memory_limit_kb + slack_kb) << 10
        self.group.begin(limit)
        self._oom_before = self.group.oom_kills()

    def join(self) -> None:
        """In the run's process, before it executes the program."""
        self.group.join()

    def join_fds(self) -> tuple[int, ...]:
        """What ``join`` writes to (``0``, for the writer), for a run started by another
        process, which is sent copies of them."""
        return tuple(self.group.joins)

    def usage(self, pid: int, memory: bool = True, cpu: bool = True) -> TreeUsage:
        """What the run has used so far (``tools._processes.Usage``): the larger of what the
        group holds (``CaseGroup.held_kb``: each page once, memfd and shmem too) and the
        resident high-water mark of its first process, ``pid`` (a burst between two
        readings); and the group's CPU time. Two reads of the group's files and one of
        ``/proc``, whatever the run started."""
        mark = held = 0
        if memory:
            mark = usage_of([pid], memory=True, cpu=False).peak_kb
            held = self.group.held_kb() or 0
        seconds = 0.0
        if cpu:
            counted = self.group.cpu_seconds()
            if counted is None:
                counted = usage_of(self.group.members(), memory=False, cpu=True).cpu_seconds
            seconds = counted
        return TreeUsage(mark, seconds, held)

    def out_of_memory(self) -> bool:
        """Whether the kernel has killed a member for the group's memory since ``begin``."""
        return self.group.oom_kills() > self._oom_before

    def kill(self) -> None:
        """Everything of the run killed now (past a limit)."""
        self.group.sweep()

    def end(self) -> CaseEnd:
        """Everything of the run killed (frozen first): its last figures."""
        gone = self.group.sweep()
        return CaseEnd(self.group.cpu_seconds(), self.out_of_memory(), gone)


def case_domain() -> CaseDomain | None:
    """A run's case group in this worker, where it has one that can be frozen and is its PID
    namespace's init (the group's members are found there): a run then is its group. None
    elsewhere (the runs are accounted as below)."""
    group = case_group()
    if group is None or not group.has("freezer") or not contained():
        return None
    return CaseDomain(group)


def contained() -> bool:
    """Whether this process is the init of a PID namespace of its own."""
    return os.getpid() == 1


def namespace_usage(spared: Iterable[int] = (), memory: bool = True, cpu: bool = True) -> TreeUsage:
    """What every process of the namespace has used, but this one and the trees of ``spared``."""
    return usage_of(_others(spared), memory, cpu)


def sweep(spared: Iterable[int] = ()) -> None:
    """Nothing left of the last run: its case group emptied (frozen first), or without one,
    every process of the namespace but this one and the trees of ``spared`` killed until none
    is left, and this process's children among them reaped; then the System V IPC objects of
    the namespace removed. A child the caller will reap itself must be reaped first, or
    spared. Nothing but the case group where this is not a namespace's init."""
    domain = case_domain()
    if domain is not None:
        domain.group.sweep()
    if not contained():
        return
    spared = list(spared)
    if domain is None:
        _kill_all_but(spared)
    keep = {pid for root in spared for pid in descendants(root)}
    _reap(lambda: [pid for pid in children() if pid not in keep])
    _remove_ipc()


def _kill_all_but(spared: list[int]) -> None:
    """Kill every process of the namespace but this one and the trees of ``spared``, listing
    it again until a listing finds none: one that forks away between a listing and its kill
    is in the next (bounded by ``_SWEEP_S``)."""
    deadline = time.monotonic() + _SWEEP_S
    while time.monotonic() < deadline:
        others = _others(spared)
        if not others:
            return
        for pid in others:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _reap(children, wait=False)


def _reap(listed: Callable[[], list[int]], wait: bool = True) -> None:
    """Reap the children ``listed()`` that have exited, without blocking on one that has not:
    with ``wait``, looking again until none is left or ``_SWEEP_S`` passed."""
    deadline = time.monotonic() + (_SWEEP_S if wait else 0)
    while True:
        pending = [pid for pid in listed() if not _reaped(pid)]
        if not pending or time.monotonic() >= deadline:
            return
        time.sleep(0.001)


def _reaped(pid: int) -> bool:
    """Whether child ``pid`` is reaped now (or was already), without waiting for it."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


def _others(spared: Iterable[int]) -> list[int]:
    keep = {os.getpid(), *(pid for root in spared for pid in descendants(root))}
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in keep:
            pids.append(int(name))
    return pids


def children() -> list[int]:
    """This process's children, each of its threads' (the kernel lists them per thread),
    zombies among them until they are reaped."""
    me = os.getpid()
    found: list[int] = []
    with contextlib.suppress(OSError):
        for thread in os.listdir(f"/proc/{me}/task"):
            path = f"/proc/{me}/task/{thread}/children"
            with contextlib.suppress(OSError, ValueError), open(path, "rb") as fh:
                found.extend(int(child) for child in fh.read().split())
    return found


def _remove_ipc() -> None:
    """Every shared memory segment, message queue and semaphore set of the IPC namespace
    removed: a run could leave one for the next (Landlock does not cover System V IPC)."""
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
