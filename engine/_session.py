"""A session: what a handshake grants, and the workspace its calls share."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from a2e_engine.sandbox._quota import mount_session_quota, unmount

__all__ = ["Policy", "SessionState"]


class Policy(Protocol):
    """Which tools a session may call (implementations: ``engine._policy``)."""

    def check(self, session: SessionState, tool_name: str) -> str | None:
        """``None`` to allow, otherwise why the tool is denied."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class SessionState:
    """Granted capabilities, the session's policies, and its workspace directory.

    The workspace is the working directory of every call of the session: what one call writes
    there, the next one reads. It is created with the session and removed with it.

    ``root`` (where the workspace and tmp lie, the session's tmpfs where quotas are on) sits in
    a directory of its own, ``guard``, of mode 0700 and the session's uid: every worker sees
    every session's mount point in its mount table, and a mount point it could reach it could
    ``statfs``, and so read another session's usage as it changes (a channel between them).
    Behind the guard, no other session uid can reach it at all.
    """

    client: str
    capabilities: frozenset[str]
    root: str
    policies: list[Policy] = field(default_factory=list)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    uid: int | None = None  # the uid its calls run as (also its gid); None: the engine's own
    quota_mb: int = 0  # its directory is a tmpfs of this size (sandbox._quota); 0: a plain one
    #: Ends it, saying why to its client (set by the host session that serves it).
    evict: Callable[[str], None] | None = None
    #: Who it is for, where the front-end knows (``Host.open_session``); empty: itself.
    tenant: str = ""
    #: Kept for as long as its front-end says (``Host.open_session``): so is its worker.
    lasting: bool = False
    #: Another path its workspace answers to in its workers, and their ``HOME`` (``Job.home``).
    home: str = ""
    #: A copy's (``engine._session_forks``): the uid its copied interpreter keeps, its family's
    #: first session's, held while it lives.
    family_uid: int | None = None
    #: Its workers frozen (``Host.pause_session``): no call starts until it is resumed.
    paused: bool = False

    @property
    def tenant_key(self) -> str:
        """The tenant whose share of the sandbox it counts in: its own, or its session's."""
        return self.tenant or f"session:{self.id}"

    @property
    def guard(self) -> str:
        return os.path.dirname(self.root)

    @property
    def workspace(self) -> str:
        return os.path.join(self.root, "workspace")

    @property
    def tmp_root(self) -> str:
        return os.path.join(self.root, "tmp")

    _tmp_fd: int = -1

    # Workers can write inside the engine's state directory (that is where workspaces live), so
    # the supervisor never follows a path there that a worker could have replaced with a
    # symlink: names are unguessable, and per-call directories are made and removed relative
    # to a descriptor of the session's tmp directory, opened for its first call (before any
    # worker of the session has run) and closed when the session is wiped or removed.

    def create_dirs(self) -> None:
        os.mkdir(self.guard, 0o700)
        guard_fd = os.open(self.guard, _DIR_FLAGS)
        try:
            self._own(".", guard_fd)
            os.mkdir(os.path.basename(self.root), 0o700, dir_fd=guard_fd)
        finally:
            os.close(guard_fd)
        if self.quota_mb:
            mount_session_quota(self.root, self.quota_mb)  # remove_dirs clears a failure
        root_fd = os.open(self.root, _DIR_FLAGS)
        try:
            self._own(".", root_fd)
            self._make_dirs(root_fd)
        finally:
            os.close(root_fd)

    def _make_dirs(self, root_fd: int) -> None:
        for name in ("workspace", "tmp"):
            os.mkdir(name, 0o700, dir_fd=root_fd)
            self._own(name, root_fd)

    def _own(self, name: str, dir_fd: int) -> None:
        """Hand a directory the session just made to the session's uid (mode stays 0700)."""
        if self.uid is not None:
            os.chown(name, self.uid, self.uid, dir_fd=dir_fd, follow_symlinks=False)

    def make_call_dir(self, name: str) -> str:
        """A fresh private tmp directory for one call; its path, for the worker."""
        if self._tmp_fd < 0:
            root_fd = os.open(self.root, _DIR_FLAGS)
            try:
                self._tmp_fd = os.open("tmp", _DIR_FLAGS, dir_fd=root_fd)
            finally:
                os.close(root_fd)
        os.mkdir(name, 0o700, dir_fd=self._tmp_fd)
        self._own(name, self._tmp_fd)
        return os.path.join(self.tmp_root, name)

    def remove_call_dir(self, name: str) -> None:
        if self._tmp_fd >= 0:
            shutil.rmtree(name, ignore_errors=True, dir_fd=self._tmp_fd)

    def untouched(self) -> bool:
        """Whether the session is as ``create_dirs`` made it: its root holds the workspace and
        tmp directories alone, both empty, all three with the mode and owner they were made
        with and no extended attribute (a cheap look, so that most wipes need no work).
        Through descriptors, never following a link; any doubt is False."""
        try:
            root_fd = os.open(self.root, _DIR_FLAGS)
        except OSError:
            return False
        try:
            if sorted(os.listdir(root_fd)) != ["tmp", "workspace"]:
                return False
            for name in (".", "workspace", "tmp"):
                fd = root_fd if name == "." else os.open(name, _DIR_FLAGS, dir_fd=root_fd)
                try:
                    info = os.fstat(fd)
                    owner = self.uid if self.uid is not None else os.geteuid()
                    if info.st_mode & 0o7777 != 0o700 or info.st_uid != owner:
                        return False
                    if os.listxattr(fd) or (name != "." and os.listdir(fd)):
                        return False
                finally:
                    if fd != root_fd:
                        os.close(fd)
        except OSError:
            return False
        finally:
            os.close(root_fd)
        return True

    def wipe(self) -> None:
        """Nothing left of what the session's calls did: everything beneath its root removed,
        the workspace and tmp directories made anew, the root's mode, owner and extended
        attributes as they were made. For a session handed to one request after another
        (``engine._session_pool``), once every call of the last has ended.

        A worker may have replaced any name below the root with a symlink or made it
        unreadable: everything is removed through descriptors, never following a link, as
        root does regardless of modes. ``OSError`` if that cannot be done (the session is then
        ended instead)."""
        if self._tmp_fd >= 0:
            os.close(self._tmp_fd)
            self._tmp_fd = -1
        root_fd = os.open(self.root, _DIR_FLAGS)
        try:
            for entry in os.scandir(root_fd):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.name, dir_fd=root_fd)
                else:
                    os.unlink(entry.name, dir_fd=root_fd)
            for attribute in os.listxattr(root_fd):
                os.removexattr(root_fd, attribute)
            os.fchmod(root_fd, 0o700)
            self._own(".", root_fd)
            self._make_dirs(root_fd)
        finally:
            os.close(root_fd)

    def held_bytes(self) -> int:
        """What its workspace's tmpfs holds now (0 without one)."""
        if not self.quota_mb:
            return 0
        try:
            fs = os.statvfs(self.root)
        except OSError:
            return 0
        return (fs.f_blocks - fs.f_bfree) * fs.f_frsize

    def remove_dirs(self) -> None:
        if self._tmp_fd >= 0:
            os.close(self._tmp_fd)
            self._tmp_fd = -1
        if self.quota_mb:
            with contextlib.suppress(OSError):
                unmount(self.root)  # its files go with the tmpfs
        shutil.rmtree(self.guard, ignore_errors=True)
