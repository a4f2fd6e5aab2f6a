"""Layer ``clean_start``: a worker starts with nothing of the supervisor's but what it is given.

Why: tool code must not reach the zygote's control socket, the host's stdout (under
``a2e serve --stdio`` it is the protocol channel) or the supervisor's environment (secrets), and
must not be left behind by a dying zygote.

How: the zygote clears, once, what every fork would otherwise copy (the environment and the
environment block it was started with) and makes itself non-dumpable (it holds every plugin
object). Each worker closes every fd it inherited but its two pipes, points stdio at
``/dev/null``, resets the zygote's signal handlers, starts a session of its own, asks for
SIGKILL when the zygote dies, and makes itself non-dumpable.
"""

from __future__ import annotations

import _signal
import os
import signal

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker

__all__ = [
    "LAYER",
    "SAFE_PATH",
    "WORKER_ENVIRONMENT",
    "close_inherited_fds",
    "detach",
    "scrub_environment",
    "zero_initial_environ",
]

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
#: All of the environment tool code starts with.
WORKER_ENVIRONMENT = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


class CleanStart(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote, once: what every worker would otherwise clear for itself.

        A fork copies the environment, so clearing it here clears it for every worker and
        spares each the copy-on-write faults of the environment's dict. The zygote needs none
        of it: it never executes a program."""
        zero_initial_environ()
        scrub_environment()
        # It holds every plugin object: no worker (same uid where there is no uid drop) may
        # read its memory through /proc/<pid>/mem.
        syscalls.prctl(syscalls.PR_SET_DUMPABLE, 0)
        prep.report("clean_start", None)

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker, before everything but the network: nothing below runs with the
        zygote's control socket open, or unaware that the zygote died."""
        close_inherited_fds(worker.keep_fds)
        detach(worker.parent_pid)


LAYER = CleanStart()


def scrub_environment() -> None:
    """Nothing of the supervisor's environment reaches tool code (see ``zero_initial_environ``)."""
    os.environ.clear()
    os.environ.update(WORKER_ENVIRONMENT)


def zero_initial_environ() -> None:
    """Overwrite the environment block the process was started with.

    ``os.environ.clear()`` does not touch the original block, and ``/proc/self/environ`` reads
    exactly that memory: a worker could read the supervisor's secrets there. The zygote zeroes
    it once (fields 50-51 of ``/proc/self/stat``), so every worker it forks has nothing to find.
    """
    import ctypes

    with open("/proc/self/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    # After the ")" the first field is field 3 (state); env_start/env_end are fields 50 and 51.
    start, end = int(fields[50 - 3]), int(fields[51 - 3])
    if 0 < start < end:
        ctypes.memset(start, 0, end - start)


def close_inherited_fds(keep: tuple[int, ...]) -> None:
    """In the worker: close every fd except stdio and ``keep``, then point stdio at
    ``/dev/null``. stdout must never be the host's."""
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if devnull > 2:
        os.close(devnull)


def detach(parent_pid: int) -> None:
    """In the worker: the zygote's handlers and wake-up fd are not the tool's; a session of its
    own; SIGKILL when the zygote dies; no reading of its memory by another worker of the same
    uid through ``/proc/<pid>/mem`` (a file open, which seccomp's ptrace rule does not see).

    Handlers through ``_signal``: the ``signal`` module's wrappers turn every handler into an
    enum, and in a fresh worker each object they touch copies a page of the zygote's."""
    _signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        _signal.signal(sig, _signal.SIG_DFL)
    os.setsid()
    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
    syscalls.prctl(syscalls.PR_SET_DUMPABLE, 0)
    if os.getppid() != parent_pid and os.getpid() != 1:
        os._exit(0)  # the zygote died between fork and prctl: nobody is waiting for us
