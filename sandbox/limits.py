"""Resource limits of one worker, as a small value type, and how they are applied (rlimits).

``memory_mb`` is ``RLIMIT_AS``: Python code sees a catchable ``MemoryError`` rather than an OOM
kill. ``cpu_seconds`` is ``RLIMIT_CPU`` (SIGXCPU, then SIGKILL a second later); the wall-clock
deadline is enforced separately by the supervisor. ``processes`` caps processes and threads of
one call through a pids cgroup (``sandbox.cgroups``) and, once a worker runs as its session's uid
(``sandbox.identity``), through ``RLIMIT_NPROC`` for all calls of that session together (it is
ignored for root). ``tmp_mb`` is the size of the call's private ``/tmp``. Workers cannot raise
any of these back: the seccomp filter refuses ``setrlimit`` and ``prlimit64`` with a new limit.
"""

from __future__ import annotations

import math
import resource
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Limits", "apply_rlimits", "least_memory_mb"]

_MB = 1024 * 1024
#: Room for a call's own first allocations, above what a worker maps when it starts.
_HEADROOM_MB = 8


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 1024
    cpu_seconds: int = 300
    open_files: int = 256
    file_size_mb: int = 256
    processes: int = 512  # processes + threads of one call (pids cgroup, where available)
    call_memory_mb: int = 2048  # everything the call holds: all processes, memfd, shm (cgroup)
    tmp_mb: int = 256  # the call's private /tmp (tmpfs, where the mount namespace is available)

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive integer, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def apply_rlimits(limits: Limits) -> None:
    """Set soft and hard limits together: a hard limit cannot be raised again without privilege."""
    pairs = [
        (resource.RLIMIT_AS, limits.memory_mb * _MB, limits.memory_mb * _MB),
        (resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * _MB, limits.file_size_mb * _MB),
        (resource.RLIMIT_CORE, 0, 0),
        # Inert while the worker is root; binding once it becomes its session's uid.
        (resource.RLIMIT_NPROC, limits.processes, limits.processes),
    ]
    for which, soft, hard in pairs:
        resource.setrlimit(which, (soft, hard))


def least_memory_mb() -> int:
    """The least ``memory_mb`` a worker forked from this process runs under, rounded up to
    16 MiB: what this process maps already (a worker starts as its copy), the stack of one
    thread (tools start threads; with less, "can't start new thread"), and a little room.
    The zygote works it out once it is ready; the engine refuses a limit below it."""
    with open("/proc/self/status") as fh:
        mapped_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    if stack <= 0 or stack == resource.RLIM_INFINITY:
        stack = 8 * _MB  # glibc's default thread stack when the limit is unlimited
    needed_mb = (mapped_kb * 1024 + stack) / _MB + _HEADROOM_MB
    return math.ceil(needed_mb / 16) * 16
