"""A copy of a session's directory for another session: how a forked sandbox gets its files.

The supervisor copies, as root, what a hostile session wrote, while its programs may still be
changing it: nothing is followed. Each entry is opened relative to its directory's descriptor
with ``O_NOFOLLOW`` and checked again once open, links are copied as links, and anything but
directories, regular files and links (FIFOs, sockets, devices) is left out. Owners and modes
come along (a forked sandbox runs as its family's uid). The session's quota bounds the size;
``MAX_DEPTH`` bounds the descriptors held.

Why a copy rather than an overlay or reflinks: a session's directory is a tmpfs (its quota),
which has no reflinks, and an overlay would need the source frozen for as long as any copy
lives, while the parent goes on writing. A copy costs what the files hold: small for the
workspaces agents make (``a2e bench --sandboxes`` measures it).
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["MAX_DEPTH", "copy_tree"]

#: Directories deeper than this are not copied (their parent is, empty).
MAX_DEPTH = 64
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 30
#: Modes are copied without setuid and setgid bits.
_PLAIN = 0o1777


def copy_tree(source: str, target: str, owner: int | None = None) -> int:
    """Everything beneath ``source`` into ``target`` (an empty directory that exists); the
    bytes of file data copied. ``owner``: the uid (and gid) of every entry made, where not
    the one it copies. ``OSError`` if ``source`` or ``target`` cannot be opened; entries that
    vanish meanwhile are skipped."""
    src = os.open(source, _OPEN_DIR)
    try:
        dst = os.open(target, _OPEN_DIR)
        try:
            return _Copier(owner).directory(src, dst, 0)
        finally:
            os.close(dst)
    finally:
        os.close(src)


#: An entry that went, or became something else, between the listing and its copy.
_CHANGED_MEANWHILE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


class _Copier:
    """One copy: whose the entries it makes are (``owner``; None, each its source's)."""

    def __init__(self, owner: int | None) -> None:
        self.owner = owner

    def directory(self, src: int, dst: int, depth: int) -> int:
        copied = 0
        with os.scandir(src) as entries:
            names = [entry.name for entry in entries]
        for name in names:
            try:
                copied += self.entry(name, src, dst, depth)
            except OSError as exc:
                if exc.errno not in _CHANGED_MEANWHILE:
                    raise
        return copied

    def entry(self, name: str, src: int, dst: int, depth: int) -> int:
        info = os.stat(name, dir_fd=src, follow_symlinks=False)
        copied = 0
        if stat.S_ISDIR(info.st_mode):
            return self.subdirectory(name, src, dst, depth) if depth < MAX_DEPTH else 0
        if stat.S_ISREG(info.st_mode):
            copied = _copy_file(name, src, dst)
        elif stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
        else:
            return 0
        uid, gid = self._owner_of(info)
        os.chown(name, uid, gid, dir_fd=dst, follow_symlinks=False)
        return copied

    def subdirectory(self, name: str, src: int, dst: int, depth: int) -> int:
        inner = os.open(name, _OPEN_DIR, dir_fd=src)
        try:
            info = os.fstat(inner)
            os.mkdir(name, 0o700, dir_fd=dst)
            made = os.open(name, _OPEN_DIR, dir_fd=dst)
            try:
                copied = self.directory(inner, made, depth + 1)
                os.fchown(made, *self._owner_of(info))
                os.fchmod(made, stat.S_IMODE(info.st_mode) & _PLAIN)
            finally:
                os.close(made)
        finally:
            os.close(inner)
        return copied

    def _owner_of(self, info: os.stat_result) -> tuple[int, int]:
        if self.owner is None:
            return info.st_uid, info.st_gid
        return self.owner, self.owner


def _copy_file(name: str, src: int, dst: int) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    reading = os.open(name, flags, dir_fd=src)
    try:
        info = os.fstat(reading)
        if not stat.S_ISREG(info.st_mode):
            return 0
        mode = stat.S_IMODE(info.st_mode)
        new = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        writing = os.open(name, new, 0o600, dir_fd=dst)
        try:
            copied = 0
            while True:
                sent = os.sendfile(writing, reading, None, _CHUNK)
                if not sent:
                    break
                copied += sent
            os.fchmod(writing, mode & _PLAIN)
        finally:
            os.close(writing)
        return copied
    finally:
        os.close(reading)
