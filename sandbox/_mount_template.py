"""Layers ``private_proc``, ``ipc_namespace``, ``minimal_dev``, ``private_tmp`` and
``readonly_filesystem``: the worker's own mount and IPC namespaces, copied from a template.

Why: a worker's ``/proc`` shows only its own PID namespace (not the supervisor's environment),
its ``/dev`` holds only harmless devices, every mount is read-only but the engine's state
directory, its ``/tmp`` is a tmpfs of its own that dies with it, and its SysV and POSIX IPC
objects are its own. Another plugin's own directories (``ZygoteSettings.plugin_dirs``: the
compile cache) are covered by an empty read-only tmpfs: they lie beneath the state directory,
which, under ``/tmp``, the worker's Landlock rule for its own ``/tmp`` covers too.

How: built from the host's for each worker, that namespace would be a large part of the worker's
CPU, and most of it the same every time: private propagation, a minimal ``/dev``, the closed
directories on the way to the interpreter opened (``sandbox._identity``), every mount but the
writable paths made read-only. The zygote builds that part once, in a template namespace that an
fd keeps alive. A worker enters the template and unshares a copy of its own: a copy keeps each
mount's flags and propagation (read-only stays read-only, the receive roots stay slaves of the
host's mounts, so later session mounts still arrive), and nothing the worker mounts in its copy
reaches the template or another worker. It then adds only what is its own: ``/proc`` and a fresh
``/tmp``. These layers need the worker's own PID namespace (``sandbox._namespaces``): they are
set up, and fall back, together.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from a2e_engine.sandbox import _run_root as run_root
from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._identity import Crossing, open_the_way
from a2e_engine.sandbox._paths import strictly_under, under
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker
from a2e_engine.sandbox._probe import namespace_made_in_child
from a2e_engine.sandbox._quota import mount_points
from a2e_engine.sandbox._run_root import RunRoot

if TYPE_CHECKING:
    from a2e_engine.sandbox.layers import Facts

__all__ = [
    "LAYER",
    "REPORTED",
    "MountPlan",
    "TmpBind",
    "create_mount_template",
    "enter_copy_of_template",
    "hide",
    "make_filesystem_read_only",
    "mount_private_proc",
    "mount_private_tmp",
    "tmp_binds",
]

#: The layers this module sets up, and reports, together.
REPORTED = ("private_proc", "ipc_namespace", "minimal_dev", "private_tmp", "readonly_filesystem")


@dataclass(frozen=True)
class MountPlan:
    """What every worker's mount namespace starts from."""

    template_fd: int
    tmp_mb: int
    tmp_binds: tuple[TmpBind, ...]  # what a worker's own /tmp shows again
    root: RunRoot | None = None  # the run layer that replaces the private /tmp (run_root)


class MountTemplate(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote: the template, or none (its layers reported off, and why) when there
        is no PID namespace for a worker or the template cannot be made. Without it a worker
        gets no PID namespace either (they are set up together), nor the way to the
        interpreter that its session's uid would need: those are reported off too."""
        settings = prep.settings
        if prep.pidns is None:
            _report(prep, prep.no_pidns)
            return
        try:
            fd = create_mount_template(
                settings.receive_mounts,
                prep.identity_ways,
                settings.writable_paths,
                settings.hidden_paths,
            )
        except OSError as exc:
            why = f"the workers' mount namespace could not be prepared: {exc.strerror or exc}"
            _report(prep, why)
            for layer in prep.need_mounts:
                layer.withdraw(prep, why)
            return
        _report(prep, None)
        root = run_root.prepare(prep, fd)
        # Without a run layer, what calls write, read and run stays visible where it lives
        # under /tmp (the run layer shows it its own way).
        keep = (*settings.writable_paths, *prep.code_paths, *settings.read_roots)
        binds = tmp_binds(keep) if root is None else ()
        prep.mounts = MountPlan(fd, settings.limits.tmp_mb, binds, root)

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker (pid 1 of its PID namespace, still privileged): a private copy of the
        template, its own IPC namespace, ``/proc``, and its run layer (``sandbox._run_root``)
        or, without one, a fresh ``/tmp`` with the binds back.

        What is bound back keeps the flags it has in the template: code read-only, the
        writable paths writable without device nodes or setuid programs. The fresh ``/tmp``
        is writable."""
        plan = prep.mounts
        if plan is None:
            return
        enter_copy_of_template(plan.template_fd)
        if plan.root is not None:
            run_root.enter(plan.root)
        else:
            mount_private_tmp(plan.tmp_mb, plan.tmp_binds)
        os.close(plan.template_fd)


LAYER = MountTemplate()


def _report(prep: Preparation, why_not: str | None) -> None:
    facts: dict[str, Facts] = {
        "private_tmp": {"size_mb": prep.settings.limits.tmp_mb},
        "readonly_filesystem": {
            "writable": list(prep.settings.writable_paths),
            "hidden": list(prep.settings.hidden_paths),
        },
    }
    for layer in REPORTED:
        prep.report(layer, why_not, **facts.get(layer, {}))
    if why_not is not None:
        run_root.report_off(prep, why_not)


def create_mount_template(
    receive: tuple[str, ...],
    crossings: Sequence[Crossing],
    writable: tuple[str, ...],
    hidden: tuple[str, ...] = (),
) -> int:
    """An fd to the template namespace. Raises ``OSError`` saying why it cannot be made."""

    def build() -> None:
        own_mount_namespace(receive)
        mount_minimal_dev()
        open_the_way(list(crossings))
        make_filesystem_read_only(writable)
        hide(hidden)

    return namespace_made_in_child("mnt", build)


def hide(paths: tuple[str, ...]) -> None:
    """Cover each directory of ``paths`` with an empty, read-only tmpfs that no one may enter:
    what is beneath it is out of reach whatever the other layers allow (a worker cannot
    unmount it: seccomp refuses ``umount``). The worker's ``/tmp`` binds the state directory
    back with its sub-mounts (``MS_REC``), this one included."""
    for path in paths:
        if os.path.isdir(path):
            syscalls.mount(
                "none",
                path,
                "tmpfs",
                syscalls.MS_RDONLY | syscalls.MS_NOSUID | syscalls.MS_NODEV | syscalls.MS_NOEXEC,
                "mode=000,size=4k,nr_inodes=1",
            )


def enter_copy_of_template(template_fd: int) -> None:
    """A private copy of the template, an IPC namespace of our own, ``/proc``."""
    syscalls.setns(template_fd, syscalls.CLONE_NEWNS)
    syscalls.unshare(syscalls.CLONE_NEWNS | syscalls.CLONE_NEWIPC)
    mount_proc()


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
    mounts, ``sandbox._quota``): a mount the host makes anywhere else later would not be
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
        if strictly_under(path, "/tmp") and os.path.lexists(path):
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
