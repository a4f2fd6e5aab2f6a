"""Files opened beneath a directory without following a link anywhere on the way.

The engine writes and reads files on a program's behalf (``run_code``'s ``files`` and
``fetch_files``, the outputs of a compile, the workspace's run directories) in places the
program's session can change while it does: another call of the session may put a symbolic
link where a directory or a file of the engine's is about to be. A path checked and then
opened by name would follow that link wherever it points, with the rights of the engine's
code rather than the program's. So every such open goes through here: ``openat2`` with
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` (Linux 5.6), relative to a
descriptor of the root; where the kernel has no ``openat2``, the path is walked component by
component with ``O_NOFOLLOW``, which refuses the same links. Either way a link, a ``..`` that
leaves the root, or a ``/proc`` magic link fails with ``OSError`` (``ELOOP``, ``EXDEV``) and
nothing is opened through it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from typing import Final

from a2e_engine.sandbox._syscalls import libc, syscall_number

__all__ = [
    "LinkRefused",
    "copy_beneath",
    "has_openat2",
    "make_dirs_beneath",
    "open_beneath",
    "open_dir",
    "open_unlinked",
    "read_beneath",
    "read_up_to",
    "relative_parts",
    "write_beneath",
]

RESOLVE_NO_MAGICLINKS: Final = 0x02
RESOLVE_NO_SYMLINKS: Final = 0x04
RESOLVE_BENEATH: Final = 0x08
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
_AT_FDCWD = -100
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_WALK_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


class LinkRefused(PermissionError):
    """A link or a way out of the root stood on the path: nothing was opened through it."""


def _openat2_number() -> int:
    try:
        return syscall_number("openat2")
    except (ImportError, OSError, ValueError):
        return -1


#: ``openat2``'s number here (resolved once, in whichever process imports this first: the
#: zygote, so that workers inherit it), or -1.
_OPENAT2 = _openat2_number()
#: Whether the kernel answered ``openat2`` (None: not asked yet).
_kernel_has_openat2: bool | None = None


def has_openat2() -> bool:
    """Whether this kernel opens files with ``openat2`` (else the component walk is used).
    Asked once: an absolute path beneath anything is refused (``EXDEV``) by a kernel that
    has it, and ``ENOSYS`` (or a filter's ``EPERM``) says it has not."""
    global _kernel_has_openat2
    if _kernel_has_openat2 is None:
        _kernel_has_openat2 = False
        if _OPENAT2 >= 0:
            try:
                os.close(_openat2(_AT_FDCWD, "/", os.O_PATH, 0))
            except OSError as exc:
                _kernel_has_openat2 = exc.errno == errno.EXDEV
    return _kernel_has_openat2


def _openat2(dir_fd: int, path: str, flags: int, mode: int) -> int:
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE)
    fd = libc.syscall(
        ctypes.c_long(_OPENAT2),
        ctypes.c_int(dir_fd),
        os.fsencode(path),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


def relative_parts(path: str) -> list[str]:
    """``path``'s components, refused with ``LinkRefused`` when it is absolute, empty, or
    climbs out with ``..``. Lexical: no link is followed on the way, so the lexical path is
    the one opened."""
    if not path or os.path.isabs(path) or "\0" in path:
        raise LinkRefused(errno.EXDEV, "not a path beneath the directory", path)
    parts = [part for part in os.path.normpath(path).split("/") if part not in ("", ".")]
    if not parts or parts[0] == "..":
        raise LinkRefused(errno.EXDEV, "not a path beneath the directory", path)
    return parts


def _refused(exc: OSError, path: str) -> OSError:
    """A link met on the way (``ELOOP``) or a way out (``EXDEV``) said as ``LinkRefused``."""
    if exc.errno in (errno.ELOOP, errno.EXDEV):
        why = "a symbolic link on the way" if exc.errno == errno.ELOOP else "outside its root"
        return LinkRefused(exc.errno, why, path)
    return exc


def open_beneath(root: int, path: str, flags: int, mode: int = 0o600) -> int:
    """``path`` (relative) opened beneath the directory ``root`` (a descriptor) with ``flags``,
    no link followed on the way or at the end."""
    parts = relative_parts(path)
    try:
        if has_openat2():
            return _openat2(root, "/".join(parts), flags, mode)
        parent = _walk(root, parts[:-1])
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        finally:
            if parent != root:
                os.close(parent)
    except OSError as exc:
        raise _refused(exc, path) from None


def _walk(root: int, parts: list[str]) -> int:
    """The directory ``parts`` names beneath ``root``, each step refusing a link (``root``
    itself when ``parts`` is empty: the caller must not close it then)."""
    current = root
    for part in parts:
        try:
            step = _step(current, part, _WALK_FLAGS)
        finally:
            if current != root:
                os.close(current)
        current = step
    return current


def _step(directory: int, name: str, flags: int) -> int:
    """The directory ``name`` in ``directory``; a link there is ``ELOOP``, as ``openat2``
    says it (``O_NOFOLLOW | O_DIRECTORY`` on a link says ``ENOTDIR``)."""
    try:
        return os.open(name, flags, dir_fd=directory)
    except NotADirectoryError:
        if stat.S_ISLNK(os.lstat(name, dir_fd=directory).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


def open_unlinked(path: str, flags: int = os.O_PATH | os.O_DIRECTORY) -> int:
    """The absolute ``path`` opened with ``flags``, refusing a link in any of its components
    (a directory the engine made and named in a job: a link there was put by a program)."""
    if not os.path.isabs(path):
        raise LinkRefused(errno.EXDEV, "not an absolute path", path)
    root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return root if path == "/" else open_beneath(root, path.lstrip("/"), flags)
    finally:
        if path != "/":
            os.close(root)


def open_dir(path: str) -> int:
    """A descriptor of the directory ``path`` names, refusing a link in its last component
    (the root a caller names is its own: the links above it are the host's)."""
    return os.open(path, _DIR_FLAGS)


def make_dirs_beneath(root: int, path: str, mode: int = 0o755) -> int:
    """The directory ``path`` beneath ``root``, made where missing; a descriptor of it (the
    caller closes it). A link met on the way is refused, never followed."""
    fd = os.dup(root)
    try:
        for part in relative_parts(path) if path not in ("", ".") else []:
            try:
                os.mkdir(part, mode, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                step = _step(fd, part, _DIR_FLAGS)
            except OSError as exc:
                raise _refused(exc, path) from None
            os.close(fd)
            fd = step
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_beneath(root: int, path: str, data: bytes, mode: int = 0o644) -> None:
    """``data`` as the file ``path`` beneath ``root`` (made or replaced; its directories made
    where missing), never through a link. A file there is truncated and rewritten, as
    ``open(path, "wb")`` would; a link or a directory there is refused."""
    directory, name = os.path.split(os.path.normpath(path))
    relative_parts(path)  # refuses an absolute path or a way out before anything is made
    parent = make_dirs_beneath(root, directory, 0o755)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, mode, dir_fd=parent)
        except OSError as exc:
            raise _refused(exc, path) from None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def read_beneath(root: int, path: str, most: int) -> bytes | None:
    """At most ``most`` bytes of the regular file ``path`` beneath ``root``, never through a
    link; ``None`` when it is not a regular file (a FIFO or a device a program left there
    must not hold the caller up)."""
    read = _read_regular(root, path, most)
    return read[0] if read is not None else None


def _read_regular(root: int, path: str, most: int | None) -> tuple[bytes, int] | None:
    """At most ``most`` bytes (``None``: all) of the regular file ``path`` beneath ``root``,
    and its permission bits; ``None`` when it is not a regular file."""
    fd = open_beneath(root, path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        return read_up_to(fd, info.st_size if most is None else most), stat.S_IMODE(info.st_mode)
    finally:
        os.close(fd)


def read_up_to(fd: int, most: int) -> bytes:
    """What ``fd`` holds, up to ``most`` bytes (fewer at its end)."""
    chunks, left = [], most
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def copy_beneath(source: int, target: int, path: str) -> None:
    """The regular file ``path`` beneath ``source`` copied, with its permission bits, to the
    same path beneath ``target`` (both directory descriptors), never through a link; anything
    but a regular file is left out."""
    read = _read_regular(source, path, None)
    if read is not None:
        write_beneath(target, path, *read)
