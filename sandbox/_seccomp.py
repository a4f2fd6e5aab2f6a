"""Layer ``seccomp``: which system calls a worker may make, compiled once to BPF in the zygote,
installed by each worker as the last step of its hardening (after it, the process can only lose
privileges).

Every profile is an allow-by-default filter with a deny list (an allow list fitted to what
CPython needs is not done yet; docs/isolation.md). Denied calls fail with ``EPERM`` so Python
code gets a clear ``PermissionError``; calls that no legitimate tool makes and that only serve
an attack (loading kernel modules, kexec, reboot, raw port I/O, handle-based opens that escape a
chroot) kill the whole process (``SIGSYS``). ``clone3`` returns ``ENOSYS`` because its flags
live in memory a filter cannot inspect; glibc then falls back to ``clone``, whose flags we can
check. System calls of a foreign ABI (32-bit ``int 0x80``) hit the bad-arch action and kill the
process.
"""

from __future__ import annotations

import errno
import os
import stat

import pyseccomp as sc

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker
from a2e_engine.sandbox._profiles import PROFILES, SeccompProfile
from a2e_engine.sandbox._syscalls import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    CLONE_THREAD,
    NAMESPACE_FLAGS,
)

__all__ = ["LAYER", "PROFILES", "SeccompProfile", "compile_profile"]

#: Refused with EPERM in every profile.
DENY_EPERM: tuple[str, ...] = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "setns",
    "unshare",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "vhangup",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "name_to_handle_at",
    "fanotify_init",
    "lookup_dcookie",
    "setrlimit",
    "uselib",
    "personality",
)

#: What a ``forkable`` profile's process may unshare, together and nothing else: the
#: namespaces its copy takes (``sandbox._forks``).
FORK_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS
#: What starts a new process or program, refused where neither may be.
_NEW_PROGRAMS = ("fork", "vfork", "execve", "execveat")

#: Kill the process on sight: no tool needs these and each is an attack or a machine takeover.
DENY_KILL: tuple[str, ...] = (
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "iopl",
    "ioperm",
    "open_by_handle_at",
)

_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
_PR_SET_MM = 35
_F_SETPIPE_SZ = 1031
_SOL_SOCKET = 1
_SO_PASSCRED = 16
_SO_PASSPIDFD = 76
_S_IFMT = 0o170000


def _add(filt: sc.SyscallFilter, action: int, name: str, *args: sc.Arg) -> None:
    try:
        filt.add_rule(action, name, *args)
    except (OSError, ValueError) as exc:
        # A call this architecture does not have: nothing to deny. Anything else is a bug.
        if sc.resolve_syscall(sc.Arch.NATIVE, name) < 0:
            return
        raise RuntimeError(f"seccomp rule for {name} failed: {exc}") from exc


def build_filter(profile: SeccompProfile) -> sc.SyscallFilter:
    eperm = sc.ERRNO(errno.EPERM)
    filt = sc.SyscallFilter(sc.ALLOW)
    filt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    for name in DENY_EPERM:
        if not (profile.forkable and name == "unshare"):
            _add(filt, eperm, name)
    if profile.forkable:  # a copy of itself, in namespaces of its own (``sandbox._forks``)
        _add(filt, eperm, "unshare", sc.Arg(0, sc.NE, FORK_NAMESPACES))
    for name in DENY_KILL:
        _add(filt, sc.KILL_PROCESS, name)
    # Raising a limit back up; reading limits (new_limit == NULL) stays allowed.
    _add(filt, eperm, "prlimit64", sc.Arg(2, sc.NE, 0))
    # No namespaces from inside; clone3 hides its flags from us, so make libc fall back to clone.
    for flag in NAMESPACE_FLAGS:
        _add(filt, eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    _add(filt, sc.ERRNO(errno.ENOSYS), "clone3")
    # Device nodes (a root worker could otherwise mknod a disk); FIFOs and files stay allowed.
    for kind in (stat.S_IFCHR, stat.S_IFBLK):
        _add(filt, eperm, "mknod", sc.Arg(1, sc.MASKED_EQ, _S_IFMT, kind))
        _add(filt, eperm, "mknodat", sc.Arg(2, sc.MASKED_EQ, _S_IFMT, kind))
    # Typing into a terminal, rewriting our memory map layout, growing a pipe past its default,
    # signalling every process. The kernel reads these arguments as 32-bit ints, so compare the
    # low 32 bits only: 0x1_0000_5412 is still TIOCSTI to the kernel.
    low32 = 0xFFFFFFFF
    _add(filt, eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, low32, _TIOCSTI))
    _add(filt, eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, low32, _TIOCLINUX))
    _add(filt, eperm, "prctl", sc.Arg(0, sc.MASKED_EQ, low32, _PR_SET_MM))
    _add(filt, eperm, "fcntl", sc.Arg(1, sc.MASKED_EQ, low32, _F_SETPIPE_SZ))
    _add(filt, eperm, "kill", sc.Arg(0, sc.MASKED_EQ, low32, low32))
    # Setuid and setgid bits: no_new_privs already makes them inert here, but a file left in the
    # state directory must not become a trap for whoever runs it outside the sandbox.
    for bit in (stat.S_ISUID, stat.S_ISGID):
        _add(filt, eperm, "chmod", sc.Arg(1, sc.MASKED_EQ, bit, bit))
        _add(filt, eperm, "fchmod", sc.Arg(1, sc.MASKED_EQ, bit, bit))
        _add(filt, eperm, "fchmodat", sc.Arg(2, sc.MASKED_EQ, bit, bit))
    if not profile.allow_processes:
        refused = ("vfork", "execve", "execveat") if profile.forkable else _NEW_PROGRAMS
        for name in refused:
            _add(filt, eperm, name)
        if not profile.forkable:
            # Threads are fine (CLONE_THREAD set); a new process is not.
            _add(filt, eperm, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    if not profile.allow_sockets:
        _add(filt, eperm, "socket")
        # socketpair() is left, but a socket it makes gets no name another process could reach
        # it by (every worker of the empty network namespace shares its abstract names), nor
        # reaches one by a name: no bind, no connect, and no SO_PASSCRED or SO_PASSPIDFD, with
        # which the kernel binds a unix socket to a name of its own on connect or send.
        for name in ("bind", "connect"):
            _add(filt, eperm, name)
        for option in (_SO_PASSCRED, _SO_PASSPIDFD):
            _add(
                filt,
                eperm,
                "setsockopt",
                sc.Arg(1, sc.MASKED_EQ, low32, _SOL_SOCKET),
                sc.Arg(2, sc.MASKED_EQ, low32, option),
            )
    if not profile.allow_processes:
        # Memory that escapes RLIMIT_AS (memfd pages, SysV segments detached after filling) is
        # refused where nothing needs it; the other profiles wait for a memory cgroup.
        for name in ("memfd_create", "shmget", "msgget", "semget", "mq_open"):
            _add(filt, eperm, name)
    return filt


def compile_profile(profile: SeccompProfile) -> bytes:
    """The profile as raw BPF, ready for ``sandbox._syscalls.install_seccomp_bpf``."""
    filt = build_filter(profile)
    # In memory: the zygote compiles after its environment is scrubbed (no TMPDIR to honour).
    with os.fdopen(os.memfd_create("a2e-seccomp", os.MFD_CLOEXEC), "w+b") as out:
        filt.export_bpf(out)
        out.seek(0)
        return out.read()


class Seccomp(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote: each profile's filter as BPF, its ``sock_fprog`` made already."""
        filters = {name: compile_profile(PROFILES[name]) for name in prep.settings.profiles}
        for program in filters.values():
            syscalls.prepare_seccomp_bpf(program)
        prep.filters = filters
        prep.report("seccomp", None, profiles=sorted(filters))

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker, last: the filter of its profile, with no_new_privs."""
        syscalls.install_seccomp_bpf(prep.filters[worker.profile])


LAYER = Seccomp()
