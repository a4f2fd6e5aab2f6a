"""How many calls run at once by default: ``max_workers`` sized for calls that wait.

A call that sleeps, waits on a socket or on a child holds a worker and no core: with as many
workers as cores, eight calls of ``time.sleep(0.1)`` on two cores take four rounds instead of
one. So the bound is several calls per core (``CALLS_PER_CORE``), as far as memory allows every
running call its whole memory limit (``Limits.call_memory_mb``, the memory cgroup's cap per
call): the rest queue, each within its own timeout, and past ``max_pending_calls`` a call is
refused (``overloaded``, 429 over HTTP). CPU-bound calls beyond the cores share them, as they
would under any other sandbox that runs what it is given.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from a2e_engine.sandbox._cgroups import own_path

__all__ = ["CALLS_PER_CORE", "WorkerBound", "available_memory_mb", "default_max_workers"]

#: Calls running at once per core the engine may use.
CALLS_PER_CORE = 4


@dataclass(frozen=True)
class WorkerBound:
    """``max_workers`` and the reason for it, as ``a2e doctor`` and ``/readyz`` say it."""

    workers: int
    why: str


def default_max_workers(call_memory_mb: int) -> WorkerBound:
    """``CALLS_PER_CORE`` calls per usable core, no more than the available memory holds at
    ``call_memory_mb`` each, and at least one."""
    cores = _usable_cores()
    by_cores = CALLS_PER_CORE * cores
    available_mb = available_memory_mb()
    by_memory = available_mb // call_memory_mb if available_mb else by_cores
    workers = max(1, min(by_cores, by_memory))
    why = (
        f"{CALLS_PER_CORE} per core on {cores} core{'s' if cores != 1 else ''}, "
        f"memory for {by_memory} calls of {call_memory_mb} MiB"
        + (f" ({available_mb} MiB available)" if available_mb else " (available memory unknown)")
    )
    return WorkerBound(workers, why)


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
