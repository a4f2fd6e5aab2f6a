"""Which running calls use the CPU now: those with a process runnable in their worker's tree.

A call that sleeps, waits on a socket or on its program holds a worker and no core; one whose
worker or any process beneath it is runnable (``R`` in ``/proc/<pid>/stat``, on a CPU or
waiting for one) computes. One look is a sample: a program that computes is runnable nearly
always, one that sleeps nearly never. Read by the supervisor (root, or the user that started
the zygotes: every worker's ``/proc`` entry is readable to it) only when calls wait for a slot
(``sandbox._slots``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["computing"]

#: How deep beneath a worker, and how many processes of one tree, are looked at.
MAX_DEPTH, MAX_PROCESSES = 4, 32


def computing(workers: Iterable[int]) -> int:
    """How many of ``workers`` (pids) have a runnable process in their tree."""
    return sum(1 for pid in workers if _runnable_beneath(pid))


def _runnable_beneath(pid: int) -> bool:
    level, seen = [pid], 0
    for _ in range(MAX_DEPTH):
        below: list[int] = []
        for process in level:
            seen += 1
            if seen > MAX_PROCESSES:
                return False
            if _state(process) == "R":
                return True
            below += _children(process)
        if not below:
            return False
        level = below
    return False


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            line = stat.read()
    except OSError:  # gone
        return ""
    # The name between the parentheses may hold anything, parentheses included.
    after = line[line.rfind(b")") + 2 :]
    return after[:1].decode("ascii", "replace")


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as children:
            return [int(child) for child in children.read().split()]
    except (OSError, ValueError):
        return []
