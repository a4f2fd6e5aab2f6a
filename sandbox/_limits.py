"""What one worker may use, as small value types: its resources (``Limits``, applied by
``sandbox._rlimits`` and ``sandbox._cgroups``) and its output (``OutputCaps``, enforced by the
supervisor as it reads, ``sandbox._run``).

``memory_mb`` is ``RLIMIT_AS``: Python code sees a catchable ``MemoryError`` rather than an OOM
kill. ``cpu_seconds`` is ``RLIMIT_CPU`` (SIGXCPU, then SIGKILL a second later); the wall-clock
deadline is enforced separately by the supervisor. ``processes`` caps processes and threads of
one call through a pids cgroup (``sandbox._cgroups``) and, once a worker runs as its session's uid
(``sandbox._identity``), through ``RLIMIT_NPROC`` for all calls of that session together (it is
ignored for root). ``tmp_mb`` is the size of the call's private ``/tmp``. Workers cannot raise
any of these back: the seccomp filter refuses ``setrlimit`` and ``prlimit64`` with a new limit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from a2e_engine.sandbox._frames import DEFAULT_MAX_FRAME

__all__ = ["SANDBOX_PROCESSES", "InvalidLimit", "Limits", "OutputCaps", "process_shares"]

#: Processes and threads of all workers of one zygote and their children together (the
#: sandbox's pids cgroup, ``sandbox._cgroups``) when how many calls run at once is not known,
#: and the least it is given when it is (``process_shares``).
SANDBOX_PROCESSES = 4096
#: What the idle workers of a zygote and their templates hold, beside the calls that run.
IDLE_PROCESSES = 256
#: The fewest processes and threads a call is given, however many run at once.
LEAST_PER_CALL = 32


def process_shares(per_call: int, workers: int, pid_max: int = 0) -> tuple[int, int]:
    """Processes and threads for each call, and for the sandbox, when ``workers`` calls may
    run at once: the sandbox's cap is every call's own together (and the idle workers'), so
    that no call, however many processes and threads it starts, makes another's fork fail;
    the calls' within half the host's pid space (``pid_max``, read from the kernel when 0),
    each call's cut to fit there; never less than ``SANDBOX_PROCESSES`` for the sandbox."""
    budget = max(SANDBOX_PROCESSES, (pid_max or _host_pid_max()) // 2)
    workers = max(1, workers)
    per_call = max(LEAST_PER_CALL, min(per_call, budget // workers))
    return per_call, max(SANDBOX_PROCESSES, per_call * workers + IDLE_PROCESSES)


def _host_pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 32768


class InvalidLimit(ValueError):
    """A limit that is not a positive integer; ``name`` is its field, so that a configuration
    file or a flag can name its own key for it."""

    def __init__(self, name: str, value: object) -> None:
        self.name = name
        self.problem = f"must be a positive integer, got {value!r}"
        super().__init__(f"Limits.{name} {self.problem}")


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
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidLimit(name, value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OutputCaps:
    """What one worker may write: bytes per frame (a job's arguments and a tool's result each
    fit in one), bytes in all, events. Past the bytes the worker is killed and the call ends as
    a violation, with what came before; events past ``max_events`` are dropped and counted, and
    only a flood far past it kills the worker (``sandbox._run``)."""

    max_frame: int = DEFAULT_MAX_FRAME
    max_output_bytes: int = 64 * 1024 * 1024
    max_events: int = 10_000

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"OutputCaps.{name} must be a positive integer, got {value!r}")
