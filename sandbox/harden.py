"""The hardening of a freshly forked worker, one layer after another, in one visible order.

The order matters: fds are closed first so that nothing below runs with the zygote's control
socket open; the mount namespace (private ``/proc``, read-only tree) needs the capabilities that
are dropped afterwards; rlimits go before seccomp because seccomp forbids changing them; seccomp
is last, after which the process can only lose privileges. What a fork inherits as it should be
(the environment, the bounding and ambient capability sets) the zygote clears once, before it
forks anyone (``clear_what_workers_inherit``).
"""

from __future__ import annotations

import _signal
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

from a2e_engine.sandbox import syscalls
from a2e_engine.sandbox.cgroups import join_cgroup
from a2e_engine.sandbox.forking import leave_idle_priority
from a2e_engine.sandbox.landlock import Ruleset
from a2e_engine.sandbox.limits import Limits, apply_rlimits
from a2e_engine.sandbox.mount_template import enter_worker_mounts
from a2e_engine.sandbox.namespaces import TmpBind

__all__ = [
    "SAFE_PATH",
    "Hardening",
    "clear_what_workers_inherit",
    "harden_worker",
    "zero_initial_environ",
]

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Hardening:
    """Everything a worker applies to itself before it reads its job."""

    keep_fds: tuple[int, ...]
    parent_pid: int
    limits: Limits
    seccomp_bpf: bytes
    mount_template_fd: int | None  # enter a copy of it (sandbox.mount_template); None: no ns
    cgroups: tuple[str, ...] = ()
    net_ns_fd: int | None = None  # join this (empty) network namespace
    landlock_abi: int = 0  # 0: no Landlock; applied per job (it needs the job's directories)
    read_paths: tuple[str, ...] = ()
    change_identity: bool = False  # keep CAP_SETUID/CAP_SETGID until the job names the uid
    # Under a private /tmp, what calls read, run and write (state directory, code) there.
    tmp_binds: tuple[TmpBind, ...] = ()


def close_inherited_fds(keep: tuple[int, ...]) -> None:
    """Close every fd except stdio and ``keep``, then point stdio at ``/dev/null``.

    stdout must never be the host's: under ``a2e serve --stdio`` it is the protocol channel.
    """
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


def reset_signals() -> None:
    """The zygote's handlers and wake-up fd are not the tool's. Through ``_signal``: the
    ``signal`` module's wrappers turn every handler into an enum, ~200 us and 30 copied pages
    in a fresh worker."""
    _signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        _signal.signal(sig, _signal.SIG_DFL)


def clear_what_workers_inherit() -> None:
    """In the zygote, once: what every worker would otherwise clear for itself.

    A fork copies the environment and the bounding and ambient capability sets, so clearing
    them here clears them for every worker, and spares each about 1 ms of CPU (most of it
    copy-on-write faults of the environment's dict and the 41 ``prctl`` calls). The zygote
    needs neither: it never executes a program, and keeps its own capabilities.
    """
    zero_initial_environ()
    scrub_environment()
    syscalls.empty_inherited_capability_sets()


def scrub_environment() -> None:
    """Nothing of the supervisor's environment reaches tool code (see ``zero_initial_environ``)."""
    os.environ.clear()
    os.environ.update({"PATH": SAFE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})


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


def harden_worker(
    setup: Hardening, while_idle: Callable[[Ruleset | None], None] | None = None
) -> Ruleset | None:
    """Apply every layer; raise on the first that fails (the caller reports it and exits).

    ``while_idle`` is the worker's own preparation (``rehearse_job_path``): it runs before the
    worker leaves idle priority, so that, like the fork and the layers above it, it only takes
    CPU time no call in flight wants. It runs our code only, before any job exists.

    Returns the Landlock ruleset with its fixed rules in place, for ``run_job`` to complete
    with the job's directories and enforce (``None`` without Landlock)."""
    if setup.net_ns_fd is not None:
        syscalls.setns(setup.net_ns_fd, syscalls.CLONE_NEWNET)  # before its fd is closed
    close_inherited_fds(setup.keep_fds)
    for group in setup.cgroups:
        join_cgroup(group)  # first: everything below, and every child, counts
    reset_signals()
    os.setsid()
    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
    # Another worker of the same uid must not read or write our memory via /proc/<pid>/mem
    # (that is a file open, which seccomp's ptrace rule does not see).
    syscalls.prctl(syscalls.PR_SET_DUMPABLE, 0)
    if os.getppid() != setup.parent_pid and os.getpid() != 1:
        os._exit(0)  # the zygote died between fork and prctl: nobody is waiting for us
    if setup.mount_template_fd is not None:
        enter_worker_mounts(setup.mount_template_fd, setup.limits.tmp_mb, setup.tmp_binds)
        os.close(setup.mount_template_fd)
    ruleset = None
    if setup.landlock_abi:
        ruleset = Ruleset(setup.landlock_abi)
        ruleset.allow_read(setup.read_paths)
        ruleset.allow_devices(("/dev",))
        if setup.mount_template_fd is not None:
            # The worker's own tmpfs, every job's tmp_dir: its rule is off the call's path.
            ruleset.allow_write(("/tmp",))
    # The environment, bounding and ambient sets: cleared by the zygote, inherited.
    apply_rlimits(setup.limits)
    if while_idle is not None:
        while_idle(ruleset)
    leave_idle_priority()  # the last step that needs a capability (see sandbox.forking)
    keep = (syscalls.CAP_SETUID, syscalls.CAP_SETGID) if setup.change_identity else ()
    syscalls.keep_only_capabilities(keep)
    syscalls.install_seccomp_bpf(setup.seccomp_bpf)
    return ruleset
