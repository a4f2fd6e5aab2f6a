"""Layer ``rlimits``: resource limits of one worker process (``sandbox._limits.Limits``).

Why: memory bombs end in a catchable ``MemoryError`` (``RLIMIT_AS``), runaway CPU in SIGXCPU,
fd exhaustion and one huge file in clear errors; no core dumps; processes per session uid once
a worker runs as its session's uid (``RLIMIT_NPROC``, ignored for root).

How: each worker sets soft and hard limits together, before seccomp, which then refuses to raise
them. The zygote measures the least address space a worker can run under: the engine refuses a
``memory_mb`` below it. Workers of profiles that start programs get no ``RLIMIT_AS`` where the
memory cgroup caps them (``Preparation.address_space_capped``): the JVM, Go and V8 reserve far
more address space than they use, and a compiler or runtime stopped by that would judge
nothing; the cgroup caps what they really hold. Everywhere else ``RLIMIT_AS`` is the cap.
"""

from __future__ import annotations

import math
import resource

from a2e_engine.sandbox._limits import Limits
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker
from a2e_engine.sandbox._profiles import PROFILES

__all__ = ["LAYER", "apply_rlimits", "least_memory_mb", "report_least_memory"]

_MB = 1024 * 1024
#: Room for a call's own first allocations, above what a worker maps when it starts.
_HEADROOM_MB = 8


class Rlimits(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote: nothing to prepare but which profiles' workers go without
        ``RLIMIT_AS`` (those that start programs, under the memory cgroup); the limits every
        worker applies, reported."""
        memory_cgroup = "memory" in prep.cgroups
        prep.address_space_capped = {
            name: not (PROFILES[name].allow_processes and memory_cgroup)
            for name in prep.settings.profiles
        }
        uncapped = sorted(name for name, capped in prep.address_space_capped.items() if not capped)
        limits = prep.settings.limits.to_dict()
        prep.report("rlimits", None, limits=limits, address_space_uncapped=uncapped)

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker, before seccomp, which refuses to raise them again."""
        apply_rlimits(prep.settings.limits, prep.address_space_capped[worker.profile])


LAYER = Rlimits()


def report_least_memory(prep: Preparation) -> None:
    """Once the zygote is all it will be (every worker starts as its copy)."""
    prep.layers["rlimits"]["least_memory_mb"] = least_memory_mb()


def apply_rlimits(limits: Limits, cap_address_space: bool = True) -> None:
    """Set soft and hard limits together: a hard limit cannot be raised again without privilege."""
    address_space = limits.memory_mb * _MB if cap_address_space else resource.RLIM_INFINITY
    pairs = [
        (resource.RLIMIT_AS, address_space, address_space),
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
