"""A fresh PID namespace per worker, and a private ``/proc`` that shows only that namespace.

Why: when the worker (pid 1 of its namespace) dies, the kernel kills every process left in the
namespace, including one that double-forked and called ``setsid``. Nothing a call started can
outlive it. The private ``/proc`` hides every process outside the call (the supervisor's
``environ`` among them).

How: ``unshare(CLONE_NEWPID)`` only affects the *next* children of the caller and may be called
once per namespace, so before each fork the zygote unshares, forks, and ``setns`` back to its
own namespace, ready for the next one (+0.15 ms per worker). The child then takes a copy of
the workers' mount template (``sandbox.mount_template``, built from the pieces here) and mounts
``proc``. Both happen when a worker is pre-forked, off the call's path.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from a2e_engine.sandbox import syscalls
from a2e_engine.sandbox.probe import Answer, ProbeFailed, in_child
from a2e_engine.sandbox.quota import mount_points, under

__all__ = [
    "PidNamespaces",
    "TmpBind",
    "create_empty_network_namespace",
    "make_filesystem_read_only",
    "mount_private_proc",
    "mount_private_tmp",
    "mount_proc",
    "namespace_made_in_child",
    "own_mount_namespace",
    "probe_pid_namespaces",
    "tmp_binds",
]


@dataclass
class PidNamespaces:
    """Zygote-side helper that puts each forked child in a new PID namespace."""

    own_ns_fd: int

    @classmethod
    def open(cls) -> PidNamespaces:
        return cls(os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC))

    def before_fork(self) -> None:
        syscalls.unshare(syscalls.CLONE_NEWPID)

    def after_fork_in_parent(self) -> None:
        syscalls.setns(self.own_ns_fd, syscalls.CLONE_NEWPID)


def create_empty_network_namespace() -> int:
    """An fd to a new network namespace with nothing in it but a down loopback.

    Created once by the zygote (about 0.5 ms and a global kernel lock, too dear per call) and
    joined by every worker whose profile has no business on the network: on top of the seccomp
    rule against ``socket()``, such a worker has no route anywhere even if a socket slipped
    through.
    """
    return namespace_made_in_child("net", lambda: syscalls.unshare(syscalls.CLONE_NEWNET))


def namespace_made_in_child(kind: str, prepare: Callable[[], None]) -> int:
    """An fd to the ``kind`` namespace (``net``, ``mnt``) that ``prepare`` leaves a short-lived
    child in. The caller itself never leaves its own namespace (in a user namespace it could
    not come back); the namespace lives on as long as the fd does."""

    def make() -> Answer:
        prepare()
        return Answer(fds=(os.open(f"/proc/self/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC),))

    try:
        return in_child(make).fds[0]
    except (ProbeFailed, IndexError) as exc:
        raise OSError(errno.EPERM, str(exc) or "no namespace was created") from None


#: The device nodes a worker gets in its private ``/dev``; every other host device (disks, loop
#: devices, /dev/kvm, /dev/kmsg, consoles, /dev/userfaultfd) simply does not exist there.
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}


def mount_private_proc(receive: tuple[str, ...] = ()) -> None:
    """In the child: own mount and IPC namespaces (changes and SysV/POSIX IPC objects stay
    private and die with the worker), ``/proc`` of our PID namespace, a minimal ``/dev``."""
    own_mount_namespace(receive)
    syscalls.unshare(syscalls.CLONE_NEWIPC)
    mount_proc()
    mount_minimal_dev()


def own_mount_namespace(receive: tuple[str, ...] = ()) -> None:
    """A mount namespace of our own whose changes never reach the host.

    Of the host's later mounts only those below ``receive`` reach us (the sessions' quota
    mounts, ``sandbox.quota``): a mount the host makes anywhere else later would not be
    read-only in here."""
    syscalls.unshare(syscalls.CLONE_NEWNS)
    if not receive:
        syscalls.mount("none", "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE)
        return
    syscalls.mount("none", "/", None, syscalls.MS_REC | syscalls.MS_SLAVE)
    # Only mounts that were shared became slaves; all but ours go private again.
    for point in mount_points(tagged="master:"):
        if not any(under(point, root) for root in receive):
            try:
                syscalls.mount("none", point, None, syscalls.MS_PRIVATE)
            except OSError:
                pass  # covered by a later mount on the same point: out of reach anyway


def mount_proc() -> None:
    """``/proc`` of the caller's PID namespace (it shows only that namespace's processes)."""
    syscalls.mount(
        "proc", "/proc", "proc", syscalls.MS_NOSUID | syscalls.MS_NODEV | syscalls.MS_NOEXEC
    )


def mount_minimal_dev() -> None:
    """A fresh tmpfs on ``/dev`` holding only harmless devices, bind-mounted from the host's.

    A read-only mount does not stop writes *to a device*: a uid-0 worker could otherwise open a
    disk or loop device and rewrite the host below any filesystem.
    """
    nodes = []
    for name in DEVICES:
        try:
            info = os.stat(f"/dev/{name}")
        except OSError:
            continue  # the host has none (no /dev/tty in a detached container, say)
        if stat.S_ISCHR(info.st_mode):
            # Held open in case they must be bound rather than made (see below).
            held = os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)
            nodes.append((name, info.st_mode, info.st_rdev, held))
    try:
        syscalls.mount(
            "tmpfs", "/dev", "tmpfs", syscalls.MS_NOSUID | syscalls.MS_NOEXEC, "mode=755"
        )
        for name, mode, rdev, held in nodes:
            path = f"/dev/{name}"
            try:
                os.mknod(path, mode, rdev)
            except PermissionError:
                # In a user namespace device nodes cannot be made, only bound from the host.
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o666))
                syscalls.mount(f"/proc/self/fd/{held}", path, None, syscalls.MS_BIND)
                continue
            os.chmod(path, stat.S_IMODE(mode))
    finally:
        for *_, held in nodes:
            os.close(held)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"/dev/{name}")


def make_filesystem_read_only(writable: tuple[str, ...]) -> None:
    """In the worker's mount namespace: every mount read-only except ``writable`` trees.

    Without it a root worker could rewrite the host: ``/proc/sys/kernel/core_pattern`` (code
    run as root on the next crash), cgroup ``release_agent``, ``.pth`` files and sources that the
    next Python start executes. Each writable path gets its own bind mount first, so that it can
    keep write access while everything around it loses it.
    """
    for path in writable:
        syscalls.mount(path, path, None, syscalls.MS_BIND | syscalls.MS_REC)
    syscalls.mount_setattr_recursive("/", attr_set=syscalls.MOUNT_ATTR_RDONLY)
    for path in writable:
        # Writable, but no device nodes and no setuid programs can take effect there.
        syscalls.mount_setattr_recursive(
            path,
            attr_set=syscalls.MOUNT_ATTR_NOSUID | syscalls.MOUNT_ATTR_NODEV,
            attr_clr=syscalls.MOUNT_ATTR_RDONLY,
        )


class TmpBind(NamedTuple):
    """A path under the host's ``/tmp`` that a worker's own ``/tmp`` shows again."""

    path: str
    is_dir: bool


def tmp_binds(keep: Iterable[str]) -> tuple[TmpBind, ...]:
    """The paths of ``keep`` that live under ``/tmp`` and exist, each once. The zygote works
    this out once: in a worker each ``stat`` and path operation costs pages copied from it."""
    binds = []
    for path in dict.fromkeys(os.path.abspath(p) for p in keep):
        if under(path, "/tmp") and path != "/tmp" and os.path.lexists(path):
            binds.append(TmpBind(path, os.path.isdir(path)))
    return tuple(binds)


def mount_private_tmp(size_mb: int, binds: tuple[TmpBind, ...] = ()) -> None:
    """A fresh, size-capped tmpfs on ``/tmp``, private to the worker and gone with it.

    The call's temporary files never touch the host's ``/tmp`` (which it cannot even see), the
    next call finds nothing of this one's, and filling it ends in ``ENOSPC`` at ``size_mb``
    (its pages also count against the call's memory cgroup). ``binds`` (``tmp_binds``: the
    engine's state directory, by default) are bound back in place.
    """
    held = []
    try:
        for bind in binds:
            try:
                held.append((bind, os.open(bind.path, os.O_PATH | os.O_CLOEXEC)))
            except FileNotFoundError:
                continue
        syscalls.mount(
            "tmpfs",
            "/tmp",
            "tmpfs",
            syscalls.MS_NOSUID | syscalls.MS_NODEV,
            f"mode=1777,size={size_mb}m,nr_inodes={max(1024, size_mb * 64)}",
        )
        for bind, fd in held:
            if bind.is_dir:
                _make_dirs(bind.path)
            else:
                _make_dirs(os.path.dirname(bind.path))
                os.close(os.open(bind.path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            proc_path = f"/proc/self/fd/{fd}"
            syscalls.mount(proc_path, bind.path, None, syscalls.MS_BIND | syscalls.MS_REC)
    finally:
        for _, fd in held:
            os.close(fd)


def _make_dirs(path: str) -> None:
    """``os.makedirs(path, 0o711, exist_ok=True)`` on a fresh tmpfs, where ``path`` is most often
    one level down (the state directory): one ``mkdir``, not ``makedirs``' walk."""
    try:
        os.mkdir(path, 0o711)
    except FileNotFoundError:
        os.makedirs(path, 0o711, exist_ok=True)
    except FileExistsError:
        pass


def probe_pid_namespaces() -> str | None:
    """Try the whole sequence once in a throw-away child. ``None`` if it works, else why not."""
    try:
        ns = PidNamespaces.open()
    except OSError as exc:
        return f"cannot open /proc/self/ns/pid: {exc.strerror}"
    try:
        try:
            ns.before_fork()
        except OSError as exc:
            return f"unshare(CLONE_NEWPID) refused: {exc.strerror} (needs root or a user namespace)"
        try:
            in_child(_a_worker_s_namespaces)
        except ProbeFailed as exc:
            return f"a private /proc or a read-only mount tree failed in a new namespace: {exc}"
        finally:
            ns.after_fork_in_parent()
        return None
    finally:
        os.close(ns.own_ns_fd)


def _a_worker_s_namespaces() -> None:
    """In the probe's child, the first of a new PID namespace."""
    mount_private_proc()
    if os.getpid() != 1:
        raise OSError(errno.EINVAL, "the child is not pid 1 of its new PID namespace")
    make_filesystem_read_only(())
