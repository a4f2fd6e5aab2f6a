"""How many calls run at once by default: sized for calls that wait, admitted by what they use.

A call that sleeps, waits on a socket or on a child holds a worker and no core: with as many
workers as cores, eight calls of ``time.sleep(0.1)`` on two cores take four rounds instead of
one. So two bounds:

- ``busy``: ``CALLS_PER_CORE`` calls per core start at once whatever they do, as far as memory
  allows each its whole memory limit (``Limits.call_memory_mb``, the memory cgroup's cap per
  call). CPU-bound calls beyond the cores share them, as they would under any other sandbox
  that runs what it is given.
- ``workers``: past ``busy``, a call starts only while fewer than ``busy`` of the running calls
  compute and the sandbox's memory is below its high-water mark (``sandbox._slots``: admitted
  by what the running calls use, not by the limits they could reach; up to ``busy`` calls that
  have run for seconds, likely to run to their deadlines, compute beside them), up to
  ``WAITING_PER_CORE`` calls per core, as far as memory holds ``HELD_WHILE_WAITING_MB`` for
  each. What they then hold together is capped by the sandbox's memory group
  (``engine._memory_bound``); without one, no call starts past ``busy``.

A call admitted while others slept may compute later, and so may they: then more than ``busy``
compute at once and share the cores until they end, as they would with ``max_workers`` set that
high. What they hold together stays under the sandbox's memory group; past it the kernel ends
the largest process there, and past ``engine._memory_bound.PRESSURE`` the engine ends the
session holding the most.

The rest queue, each within its own timeout, and past ``max_pending_calls`` a call is refused
(``overloaded``, 429 over HTTP). ``max_workers`` given in the configuration is both bounds: that
many calls run at once, whatever they do, and no more.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from a2e_engine.sandbox._cgroups import own_path

__all__ = [
    "CALLS_PER_CORE",
    "WAITING_PER_CORE",
    "WorkerBound",
    "available_memory_mb",
    "default_max_workers",
]

#: Calls that start at once per core the engine may use, whatever they do.
CALLS_PER_CORE = 4
#: Calls that may hold a worker at once per core, while those beyond the first bound wait.
WAITING_PER_CORE = 16
#: What a call that waits holds, about: its worker and a program of its own (the resident
#: memory of a warm Python fork and a small program, with room to spare).
HELD_WHILE_WAITING_MB = 64


@dataclass(frozen=True)
class WorkerBound:
    """How many calls may hold a worker at once, how many of them start whatever they do
    (``busy``), and the reason, as ``a2e doctor`` and ``/readyz`` say it."""

    workers: int
    why: str
    busy: int = 0

    def __post_init__(self) -> None:
        if not self.busy:
            object.__setattr__(self, "busy", self.workers)


def default_max_workers(call_memory_mb: int) -> WorkerBound:
    """``CALLS_PER_CORE`` calls per usable core, no more than the available memory holds at
    ``call_memory_mb`` each, and at least one, start whatever they do; up to
    ``WAITING_PER_CORE`` per core hold a worker while the others wait, no more than the
    available memory holds at ``HELD_WHILE_WAITING_MB`` each."""
    cores = _usable_cores()
    available_mb = available_memory_mb()
    by_memory = available_mb // call_memory_mb if available_mb else CALLS_PER_CORE * cores
    busy = max(1, min(CALLS_PER_CORE * cores, by_memory))
    waiting = available_mb // HELD_WHILE_WAITING_MB if available_mb else busy
    workers = max(busy, min(WAITING_PER_CORE * cores, waiting))
    why = (
        f"{CALLS_PER_CORE} per core on {cores} core{'s' if cores != 1 else ''}, "
        f"memory for {by_memory} calls of {call_memory_mb} MiB"
        + (f" ({available_mb} MiB available)" if available_mb else " (available memory unknown)")
        + f"; up to {workers} while calls wait"
    )
    return WorkerBound(workers, why, busy)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except OSError:
        return os.cpu_count() or 1


def available_memory_mb() -> int:
    """``MemAvailable``, or less where this process's memory cgroup caps it (0: unknown)."""
    found = 0
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    found = int(line.split()[1]) // 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    capped = _cgroup_limit_mb()
    return min(found, capped) if found and capped else found or capped


def _cgroup_limit_mb() -> int:
    """What this process's memory cgroup (v1, else v2) still allows, in MiB (0: no limit)."""
    for limit_file, usage_name in (
        (
            f"/sys/fs/cgroup/memory{own_path('memory')}/memory.limit_in_bytes",
            "memory.usage_in_bytes",
        ),
        (f"/sys/fs/cgroup{own_path('')}/memory.max", "memory.current"),
    ):
        try:
            with open(limit_file) as fh:
                limit = fh.read().strip()
            with open(os.path.join(os.path.dirname(limit_file), usage_name)) as fh:
                usage = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:
            return max(0, int(limit) - usage) >> 20
    return 0
