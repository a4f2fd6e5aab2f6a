"""Session uids kept apart between engines on one machine: two ``a2e serve``, an embedded
engine next to a service, the node engines that several drivers' ``RayEngine``s start on one
host. Each hands out uids from its configured range (``SessionUids``); two configured alike
would give two tenants one uid, and with it one ``RLIMIT_NPROC`` count, one keyring, and each
other's files wherever the uid's mode bits are the only guard.

So a uid is handed out only while its engine holds its block (``BLOCK_UIDS`` uids, numbered
from 0, whatever range an engine was given) machine-wide: an exclusive ``flock`` on a file of
its own in a root-only directory, taken when the engine's first session gets a uid there and
let go when its last one gives it back (but for one block it takes at its start and keeps:
``SessionUids``). The kernel lets go of every block of an engine whose
process ends, however it ends; an ``flock`` belongs to the open file, so two engines in one
process are kept apart as two processes are.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import threading

__all__ = ["BLOCK_UIDS", "CLAIMS_DIR", "UidBlocks", "machine_blocks"]

log = logging.getLogger("a2e.engine")

#: How many uids a block holds: enough that an engine claims few files, few enough that two
#: engines busy at once both find blocks in a range of thousands.
BLOCK_UIDS = 64
#: Where the blocks' lock files are: root's, on a tmpfs that a reboot empties.
CLAIMS_DIR = "/run/a2e-uid-blocks"


class UidBlocks:
    """The blocks one engine holds, and how many of its live uids each has."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._held: dict[int, tuple[int, int]] = {}  # block -> (its lock's fd, uids taken)
        self._lock = threading.Lock()

    def holds(self, uid: int) -> bool:
        """Whether this engine holds ``uid``'s block now."""
        with self._lock:
            return uid // BLOCK_UIDS in self._held

    def hold(self, uid: int) -> bool:
        """``uid`` taken by this engine: its block held (claimed now if it was not), or False
        when another engine holds it."""
        block = uid // BLOCK_UIDS
        with self._lock:
            held = self._held.get(block)
            if held is None:
                fd = self._claim(block)
                if fd is None:
                    return False
                held = (fd, 0)
            self._held[block] = (held[0], held[1] + 1)
            return True

    def let_go(self, uid: int) -> None:
        """``uid`` given back: its block, once no uid of it is taken, for any engine."""
        block = uid // BLOCK_UIDS
        with self._lock:
            held = self._held.get(block)
            if held is None:
                return
            fd, taken = held
            if taken > 1:
                self._held[block] = (fd, taken - 1)
                return
            del self._held[block]
        os.close(fd)  # the lock goes with the open file

    def close(self) -> None:
        """Every block let go (the engine stops)."""
        with self._lock:
            fds = [fd for fd, _ in self._held.values()]
            self._held.clear()
        for fd in fds:
            os.close(fd)

    def _claim(self, block: int) -> int | None:
        path = os.path.join(self.directory, str(block))
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd


def machine_blocks(directory: str = CLAIMS_DIR) -> UidBlocks | None:
    """The claims of an engine that changes uids (root): None, said in the log, where their
    directory cannot be made root's alone (the engine's uids are then kept apart from no
    other engine's)."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.lstat(directory)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise PermissionError(f"{directory} is not a directory of this user's")
        if info.st_mode & 0o077:
            os.chmod(directory, 0o700)
    except OSError as exc:
        log.warning("session uids are not kept apart from other engines' on this machine: %s", exc)
        return None
    return UidBlocks(directory)
