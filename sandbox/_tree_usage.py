"""What a running command's process tree has used so far, read from ``/proc``: the high-water mark
of its resident memory (``VmHWM``) and the CPU time it has spent, over its process and every
descendant.

``run_captured`` reads it a hundred times a second to end a command the moment it has held more
memory or spent more CPU time than it may. Resident memory rather than address space: the JVM, Go
and V8 reserve far more address space than they use, and a limit on it would stop them before they
run. The kernel's ``ru_maxrss`` cannot stand in for it: a child forked from the worker starts as a
copy of the worker's pages, and the mark survives ``execve``, so it is never below the worker's own
size. CPU time is each member's user and system time (all its threads) plus what its children
that it has reaped used; ``wait4`` gives the exact figure once the command is reaped, this one
is what a limit can act on while it runs, in clock ticks. A process that left the tree (a double
fork re-parents it to the worker or the zygote) is not in it: where the worker has a PID
namespace of its own, a run is accounted as everything in it instead (``sandbox._run_domain``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from a2e_engine.sandbox._limits import SANDBOX_PROCESSES

__all__ = [
    "MAX_PROCESSES",
    "TreeUsage",
    "descendants",
    "own_resident_kb",
    "tree_usage",
    "usage_of",
]

#: As many processes as the sandbox holds at most (its pids cgroup): a tree is read whole.
MAX_PROCESSES = SANDBOX_PROCESSES
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
#: In ``/proc/PID/stat``, after the command's name: utime, stime, cutime, cstime.
_CPU_FIELDS = slice(11, 15)


@dataclass(frozen=True)
class TreeUsage:
    peak_kb: int = 0  # the sum of VmHWM: what the tree has held at most, or a little more
    cpu_seconds: float = 0.0
    #: What a case group holds as the kernel charges it (``sandbox._run_domain``): the run's own
    #: pages alone, none it shares with the worker it was forked from.
    held_kb: int = 0


def tree_usage(pid: int, memory: bool = True, cpu: bool = True) -> TreeUsage:
    """What ``pid`` and its descendants have used (0 for what has exited meanwhile); ``memory``
    and ``cpu`` say which of the two to read, the other is left at 0."""
    return usage_of(descendants(pid), memory, cpu)


def usage_of(pids: Iterable[int], memory: bool = True, cpu: bool = True) -> TreeUsage:
    """What the processes ``pids`` have used, together (0 for one that has exited)."""
    kb, ticks = 0, 0
    for pid in pids:
        try:
            if memory:
                kb += _status_kb(f"/proc/{pid}/status", b"VmHWM:")
            if cpu:
                ticks += _cpu_ticks(f"/proc/{pid}/stat")
        except (OSError, ValueError):
            continue
    return TreeUsage(kb, ticks * _TICK_S)


def descendants(pid: int) -> list[int]:
    """``pid`` and every process beneath it, the children of each of their threads included
    (a child forked by a thread is listed under that thread alone)."""
    found: list[int] = []
    pending = [pid]
    while pending and len(found) < MAX_PROCESSES:
        current = pending.pop()
        found.append(current)
        try:
            threads = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{current}/task/{thread}/children", "rb") as fh:
                    pending.extend(int(child) for child in fh.read().split())
            except (OSError, ValueError):
                continue
    return found


def own_resident_kb() -> int:
    """This process's resident set now: what a child forked from it starts with."""
    try:
        return _status_kb("/proc/self/status", b"VmRSS:")
    except (OSError, ValueError):
        return 0


def _status_kb(path: str, field: bytes) -> int:
    with open(path, "rb") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1])
    return 0  # a zombie: its memory is gone


def _cpu_ticks(path: str) -> int:
    """User and system ticks of a process (all its threads) and of its reaped children. The
    command's name comes before them in brackets and may hold anything, ``)`` and spaces too:
    the fields are counted from the last ``)``."""
    with open(path, "rb") as fh:
        stat = fh.read()
    return sum(int(field) for field in stat[stat.rindex(b")") + 2 :].split()[_CPU_FIELDS])
