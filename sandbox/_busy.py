"""Which running calls use the CPU now: those with a process runnable in their worker's tree.

A call that sleeps, waits on a socket or on its program holds a worker and no core; one whose
worker or any process beneath it has a runnable thread (``R`` in its ``stat``, on a CPU or
waiting for one) computes. One look is a sample: a program that computes is runnable nearly
always, one that sleeps nearly never. Read by the supervisor (root, or the user that started
the zygotes: every worker's ``/proc`` entry is readable to it) only when calls wait for a slot
(``sandbox._slots``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["computing", "pid_of"]

#: How deep beneath a worker, and how many processes of one tree, are looked at.
MAX_DEPTH, MAX_PROCESSES = 4, 32


def computing(workers: Iterable[int]) -> int:
    """How many of ``workers`` (pids in this process's PID namespace: ``pid_of``) have a
    runnable thread in their tree."""
    return sum(1 for pid in workers if _runnable_beneath(pid))


def pid_of(pidfd: int) -> int | None:
    """The pid of the process ``pidfd`` refers to, as this process's ``/proc`` names it (a
    zygote in a user namespace of its own is pid 1 of its own PID namespace, and the pids it
    reports mean nothing here); ``None`` if it cannot be read or the process is gone."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as info:
            for line in info:
                if line.startswith(b"Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError, IndexError):
        pass
    return None


def _runnable_beneath(pid: int) -> bool:
    level, seen = [pid], 0
    for _ in range(MAX_DEPTH):
        below: list[int] = []
        for process in level:
            seen += 1
            if seen > MAX_PROCESSES:
                return False
            for thread in _threads(process):  # a program may compute in any of its threads
                if _state(process, thread) == "R":
                    return True
                below += _children(process, thread)
        if not below:
            return False
        level = below
    return False


def _threads(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone
        return []


def _state(pid: int, thread: str) -> str:
    try:
        with open(f"/proc/{pid}/task/{thread}/stat", "rb") as stat:
            line = stat.read()
    except OSError:  # gone
        return ""
    # The name between the parentheses may hold anything, parentheses included.
    after = line[line.rfind(b")") + 2 :]
    return after[:1].decode("ascii", "replace")


def _children(pid: int, thread: str) -> list[int]:
    """The children that ``thread`` of ``pid`` forked (the kernel lists them per thread)."""
    try:
        with open(f"/proc/{pid}/task/{thread}/children", "rb") as children:
            return [int(child) for child in children.read().split()]
    except (OSError, ValueError):
        return []
