"""What an engine killed outright leaves behind, and how the next one clears it.

An engine cleans up after itself when it stops, and its zygote (a session of its own, so that
a signal to the supervisor's process group does not reach it) cleans up for a supervisor that
died. When both die at once (the OOM killer, a container stopped hard), nobody is left to:
the state directory stays with its session tmpfs mounts (the sessions' files, held in memory),
and the sandbox's cgroups stay with their slots. Each engine
that starts clears what dead engines left next to it.

Both carry their owner in their names: ``owner_tag()``, the inode of the owner's PID namespace
and its pid there. A leftover is only touched when its owner is certainly gone: this process is
in the initial PID namespace and sees every process, the owner was in that namespace too, and
no process has its pid (one that has may be a reuse: it is left alone); or a state directory
says it was made in an earlier boot. Removal never crosses a mount: a directory goes only once
nothing is mounted below it any more, and a cgroup only if it is empty (the kernel refuses
``rmdir`` otherwise).
"""

from __future__ import annotations

import logging
import os
import re
import shutil

from a2e_engine.sandbox._paths import under
from a2e_engine.sandbox._quota import mount_points, unmount_tree

__all__ = ["boot_id", "dead_owners", "mark_boot", "owner_tag", "sweep_state_dirs"]

log = logging.getLogger(__name__)

#: The inode of the initial PID namespace (``PROC_PID_INIT_INO``): fixed by the kernel.
INITIAL_PID_NS = 0xEFFFFFFC
_TAG = re.compile(r"(\d+)-(\d+)")


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def owner_tag() -> str:
    """``<pid namespace inode>-<pid>`` of this process, for the names of what it creates."""
    return f"{_pid_namespace()}-{os.getpid()}"


def _owner_is_gone(namespace: int, pid: int) -> bool:
    return (
        namespace == INITIAL_PID_NS == _pid_namespace()
        and pid > 0
        and not os.path.exists(f"/proc/{pid}")
    )


#: A state directory's record of the boot it was made in (``mark_boot``).
BOOT_FILE = ".boot-id"


def boot_id() -> str:
    """This boot's id (the kernel's), or ``""`` where it does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def mark_boot(directory: str) -> None:
    """Record in ``directory`` the boot it was made in (see ``dead_owners``)."""
    with open(os.path.join(directory, BOOT_FILE), "w") as fh:
        fh.write(boot_id())


def _from_an_earlier_boot(entry: os.DirEntry[str], now: str) -> bool:
    """Made in another boot than this one: its owner is gone, whatever has its pid now (state
    directories live in ``/var/tmp``, which outlives a reboot). A boot id rather than times:
    a clock set after the boot would make a live directory look older than the boot."""
    try:
        with open(os.path.join(entry.path, BOOT_FILE)) as fh:
            made_in = fh.read().strip()
    except OSError:
        return False
    return bool(now and made_in) and made_in != now


def dead_owners(parent: str, prefix: str) -> list[os.DirEntry[str]]:
    """Directories ``<parent>/<prefix><owner tag>[-anything]`` whose owner is certainly gone."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    found = []
    now = boot_id()
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        match = _TAG.match(entry.name[len(prefix) :])
        rest = entry.name[len(prefix) + match.end() :] if match else ""
        if match is None or rest[:1] not in ("", "-"):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        owner = int(match.group(1)), int(match.group(2))
        if _owner_is_gone(*owner) or _from_an_earlier_boot(entry, now):
            found.append(entry)
    return found


def sweep_state_dirs(parent: str, prefix: str) -> list[str]:
    """Remove the state directories of dead engines of our uid in ``parent``, their session
    quotas unmounted first. Returns what was removed."""
    removed = []
    for entry in dead_owners(parent, prefix):
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
        except OSError:
            continue
        path = entry.path
        unmount_tree(path)
        if any(under(point, path) for point in mount_points()):
            log.warning("left %s of a dead engine: something is still mounted below it", path)
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            removed.append(path)
    if removed:
        log.warning("removed what engines killed outright left behind: %s", ", ".join(removed))
    return removed
