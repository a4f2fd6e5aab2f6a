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
no process has its pid (one that has may be a reuse: it is left alone); or it was last changed
before the machine booted. Removal never crosses a
mount: a directory goes only once nothing is mounted below it any more, and a cgroup only if it
is empty (the kernel refuses ``rmdir`` otherwise).
"""

from __future__ import annotations

import logging
import os
import re
import shutil

from a2e_engine.sandbox.quota import mount_points, under, unmount_tree

__all__ = ["boot_time", "dead_owners", "owner_tag", "sweep_state_dirs"]

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


def boot_time() -> float:
    """When this machine booted (wall clock, seconds), or 0 where ``/proc/stat`` says not."""
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0.0


def _from_an_earlier_boot(entry: os.DirEntry[str], booted: float) -> bool:
    """Last changed before this machine booted: its owner is gone, whatever has its pid now
    (state directories live in ``/var/tmp``, which outlives a reboot)."""
    try:
        return 0 < entry.stat(follow_symlinks=False).st_mtime < booted
    except OSError:
        return False


def dead_owners(parent: str, prefix: str) -> list[os.DirEntry[str]]:
    """Directories ``<parent>/<prefix><owner tag>[-anything]`` whose owner is certainly gone."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    found = []
    booted = boot_time()
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
        if _owner_is_gone(*owner) or _from_an_earlier_boot(entry, booted):
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
