"""Layer ``disk_quota``: each session's directory is a tmpfs of its own, capped in bytes and inodes.

Why: a call could otherwise fill the disk the state directory lives on, for the host and for
every other session; ``RLIMIT_FSIZE`` caps one file, not a thousand. A size-capped tmpfs is the
one quota that needs no filesystem support (project quotas need ``prjquota`` mount options few
hosts have): writing past it fails with ``ENOSPC``, and its pages count against the memory
cgroup of the call that wrote them.

How: the supervisor mounts the session's tmpfs in the host's mount namespace, where the host
can read the workspace too. Workers are pre-forked into mount namespaces of their own *before*
the session exists, so the engine's state directory is made a shared mount first; each worker
keeps it as a slave (``sandbox._mount_template``) and sees every session mount appear and vanish.
A supervisor that dies without cleaning up leaves that to its zygote; if both are killed at
once, the next engine to start clears them (``sandbox._leftovers``).

A worker a session keeps (``sandbox._resident``: an E2B sandbox's interpreter) would go on
receiving every later session's mount, and hold a copy of each, for as long as it lives:
thousands of kept workers would hold the square of that many mounts (kernel memory), and each
new session would cost a mount in every one of them. So once a worker is kept, its zygote
narrows its namespace (``narrow``, from a helper process that joins it): the state directory
stops receiving there, and every other session's mount there is detached; its own stays.
"""

from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._paths import under

if TYPE_CHECKING:
    from a2e_engine.sandbox.layers import LayerReport

__all__ = [
    "enable",
    "mount_points",
    "mount_session_quota",
    "narrow",
    "report",
    "share_state_dir",
    "unmount",
    "unmount_tree",
]

MNT_DETACH = 2
UMOUNT_NOFOLLOW = 8
#: The name of the mount point of a session's tmpfs, in its guard directory (engine._session).
SESSION_MOUNT = "session"


def enable(state_dir: str, workspace_mb: int) -> str | None:
    """In the supervisor, before the zygote starts: make per-session quotas possible under
    ``state_dir``; why they are off, or ``None`` when they are on."""
    if not workspace_mb:
        return "disabled by configuration"
    if os.geteuid() != 0:
        return "not running as root: no tmpfs per session"
    try:
        share_state_dir(state_dir)
    except OSError as exc:
        return f"cannot make the state directory a shared mount: {exc.strerror}"
    return None


def report(layers: dict[str, LayerReport], why_not: str | None, workspace_mb: int) -> None:
    """The supervisor's own layer, beside what the zygote reported."""
    layers["disk_quota"] = {
        "active": why_not is None,
        "reason": why_not or "",
        "workspace_mb": workspace_mb,
    }


def share_state_dir(path: str) -> None:
    """Make ``path`` a mount of its own whose later sub-mounts propagate to workers."""
    syscalls.mount(path, path, None, syscalls.MS_BIND)
    try:
        syscalls.mount("none", path, None, syscalls.MS_SHARED)
    except OSError:
        unmount(path)
        raise


def mount_session_quota(path: str, size_mb: int) -> None:
    """A tmpfs of ``size_mb`` on the (empty) session directory ``path``, root's (the session
    makes it its uid's with ``chown``: an owner in the mount's options would show every worker
    which uid each live session has, in its mount table)."""
    syscalls.mount(
        "tmpfs",
        path,
        "tmpfs",
        syscalls.MS_NOSUID | syscalls.MS_NODEV,
        f"size={size_mb}m,nr_inodes={max(1024, size_mb * 64)},mode=0700",
    )


def unmount(path: str) -> None:
    """Detach ``path`` (lazily: a worker still inside it cannot keep the session alive)."""
    if syscalls.libc.umount2(os.fsencode(path), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount2({path!r}): {os.strerror(err)}")


def mount_points(tagged: str = "") -> list[str]:
    """Mount points of this process's mount namespace, in mount order; with ``tagged``, only
    those whose propagation fields include it (``"shared:"``, ``"master:"``)."""
    points = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split(" ")
            optional = fields[6 : fields.index("-")] if "-" in fields else []
            if tagged and not any(f.startswith(tagged) for f in optional):
                continue
            points.append(_unescaped(fields[4]))
    return points


def narrow(pid: int, keep: str, roots: tuple[str, ...], template_fd: int) -> None:
    """In the zygote: worker ``pid``'s mount namespace made to keep, of the session mounts
    under ``roots`` (the state directory), only ``keep`` (its own session's), and to receive no
    more. Done by a helper process of its own, forked here and reaped with the zygote's other
    children. Nothing at all unless the namespace is the worker's own copy: not this process's
    (no mount layer: the host's mounts are never touched), nor the template's
    (``template_fd``: a worker between joining it and copying it; every later worker is a
    copy of it)."""
    fds: list[int] = []
    try:
        fds.append(os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC))
        shared = (os.stat("/proc/self/ns/mnt").st_ino, os.fstat(template_fd).st_ino)
        if os.fstat(fds[0]).st_ino in shared:  # the very namespace the helper would join
            return
        fds.append(os.open(f"/proc/{pid}/mountinfo", os.O_RDONLY | os.O_CLOEXEC))  # read once in
        if os.fork() == 0:  # pragma: no cover - the helper's life ends in _exit
            code = 1
            try:
                syscalls.prctl(syscalls.PR_SET_PDEATHSIG, 9)
                _narrow_here(fds[0], fds[1], keep, roots)
                code = 0
            finally:
                os._exit(code)
    finally:
        for fd in fds:
            os.close(fd)


def _narrow_here(namespace: int, mountinfo: int, keep: str, roots: tuple[str, ...]) -> None:
    """In the helper: join the namespace, stop it receiving, detach the other sessions'
    mounts (never following a link: a guard directory is its session's own to fill)."""
    syscalls.setns(namespace, syscalls.CLONE_NEWNS)
    for root in roots:
        syscalls.mount("none", root, None, syscalls.MS_REC | syscalls.MS_PRIVATE)
    state_dirs = {root.rstrip("/") for root in roots}
    chunks = []
    while chunk := os.read(mountinfo, 1 << 16):
        chunks.append(chunk)
    for line in b"".join(chunks).decode("latin-1").splitlines():
        point = _unescaped(line.split(" ")[4])
        if point == keep or os.path.basename(point) != SESSION_MOUNT:
            continue
        if os.path.dirname(os.path.dirname(point)) in state_dirs:  # <state>/<guard>/session
            syscalls.libc.umount2(os.fsencode(point), MNT_DETACH | UMOUNT_NOFOLLOW)


def _unescaped(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes arrive as octal escapes."""
    return field.encode("latin-1").decode("unicode_escape").encode("latin-1").decode()


def unmount_tree(root: str) -> None:
    """Detach every mount at or below ``root``, deepest first (engine shutdown)."""
    for point in sorted((p for p in mount_points() if under(p, root)), key=len, reverse=True):
        try:
            unmount(point)
        except OSError:
            pass  # already gone with its parent
