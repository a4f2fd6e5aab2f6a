"""``a2e call --keep-output DIR``: the whole of a capped stream, copied out of the call's session
before ``a2e call`` ends it, and the result's references to it rewritten to the copies.

A capped stream (``tools._output``) names the file that holds all of it, in the session's
workspace (``.a2e/output/<call>-<stream>.txt``): in its marker and in ``<stream>_path`` beside
it. ``a2e call``'s session, and that file with it, ends with the command, so without the flag the
references are rewritten to say how to keep it rather than name a file about to be gone; the
HTTP service's one-request sessions rewrite them the same way (``not_kept`` says why).

The paths come from the worker, which a tool controls. A file is copied only if it is a regular
file, with no other link, directly in this session's ``.a2e/output``: reached from the engine's
own path to the workspace (``Engine.session_workspace``) one component at a time, never
following a symlink, since the worker can replace any component below the workspace with one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
from typing import Any

from a2e_engine.tools._output import MARKER, SPOOL_DIR, marker, saved_in

__all__ = ["NOT_KEPT", "OutputKeeper", "prepare_directory"]

#: Where the whole of a stream went when nobody asked to keep it.
NOT_KEPT = (
    "not kept: it was in the call's session, which ended with a2e call "
    "(rerun with --keep-output DIR to keep it)"
)

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: opening a FIFO that a tool left in place of the file must not wait for a writer.
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_UNSAFE = re.compile(r"[^\w.-]")


class NotKept(Exception):
    """A path a result names that is not one of this session's output files."""


def prepare_directory(path: str) -> str:
    """``DIR`` made if missing, before any call runs (a call of minutes must not end in a
    directory that cannot be written); its absolute path, or ``OSError``."""
    os.makedirs(path, exist_ok=True)
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
    return os.path.abspath(path)


class OutputKeeper:
    """Rewrites one call's result: each stream saved in the session is copied into ``into``
    (``None``: not asked) and the result names the copy, or says why there is none.

    ``problems`` lists, one line each, what was asked and could not be kept."""

    def __init__(
        self, tool: str, workspace: str | None, into: str | None, not_kept: str = NOT_KEPT
    ) -> None:
        self.tool = tool
        self.workspace = workspace
        self.into = into
        self.not_kept = not_kept  # what a reference says when nobody asked to keep the file
        self.problems: list[str] = []
        self._outcomes: dict[str, tuple[str, str]] = {}  # named path: (copy, why not)

    def rewrite(self, value: Any) -> Any:
        """``value`` (a result's ``data``) with every reference to a saved stream rewritten."""
        if isinstance(value, str):
            return MARKER.sub(self._rewrite_marker, value) if "characters of" in value else value
        if isinstance(value, list):
            return [self.rewrite(item) for item in value]
        if not isinstance(value, dict):
            return value
        rewritten = {key: self.rewrite(item) for key, item in value.items()}
        for name, text in value.items():
            named = value.get(f"{name}_path")
            if not (isinstance(text, str) and isinstance(named, str) and _marks(text, name)):
                continue
            copy, why_not = self._keep(named, name)
            if copy:
                rewritten[f"{name}_path"] = copy
                continue
            del rewritten[f"{name}_path"]
            note = value.get(f"{name}_note")
            rewritten[f"{name}_note"] = f"{note}; {why_not}" if note else why_not
        return rewritten

    def _rewrite_marker(self, match: re.Match[str]) -> str:
        named = saved_in(match["where"])
        if not named:
            return match[0]  # nothing was saved (the marker says why, or its note does)
        copy, why_not = self._keep(named, match["name"])
        omitted = int(match["omitted"])
        return marker(omitted, match["name"], why_not, path=copy)

    def _keep(self, named: str, stream: str) -> tuple[str, str]:
        """The copy of the file that ``named`` claims to be, or why there is none."""
        if named not in self._outcomes:
            if self.into is None:
                self._outcomes[named] = ("", self.not_kept)
            else:
                try:
                    self._outcomes[named] = (self._copy(named, self.into), "")
                except (NotKept, OSError) as exc:
                    why = str(exc) if isinstance(exc, NotKept) else _os_error(exc)
                    self._outcomes[named] = ("", f"not kept: {why}")
                    self.problems.append(f"{stream}: {named}: not copied: {why}")
        return self._outcomes[named]

    def _copy(self, named: str, into: str) -> str:
        source = self._open_saved(named)
        try:
            name = _UNSAFE.sub("_", f"{self.tool}-{os.path.basename(named)}")
            target, out = _new_file(into, name)
            try:
                with os.fdopen(source, "rb", closefd=False) as src, os.fdopen(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(target)
                raise
            return target
        finally:
            os.close(source)

    def _open_saved(self, named: str) -> int:
        """A descriptor of the file ``named`` if it is one of this session's saved streams."""
        if self.workspace is None:
            raise NotKept("the call's session had already ended")
        spool = os.path.join(self.workspace, SPOOL_DIR)
        directory, name = os.path.split(named)
        if directory != spool or name in ("", ".", ".."):
            raise NotKept(f"not a file of this session's {SPOOL_DIR}")
        session_root, workspace = os.path.split(self.workspace)
        steps = [(step, _DIR) for step in (workspace, *SPOOL_DIR.split(os.sep))]
        fd = os.open(session_root, _DIR)
        try:
            for step, flags in [*steps, (name, _FILE)]:
                child = _open_in(fd, step, flags)
                os.close(fd)
                fd = child
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotKept("not a regular file")
            if info.st_nlink != 1:
                raise NotKept("a link to a file elsewhere (it has other names)")
            return fd
        except BaseException:
            os.close(fd)
            raise


def _open_in(parent: int, name: str, flags: int) -> int:
    """``name`` in the directory ``parent``, opened only if it is not a symlink."""
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        raise NotKept(f"{name} is {'a symbolic link' if link else 'not a directory'}") from None


def _new_file(directory: str, name: str) -> tuple[str, int]:
    """A file of ``directory`` made for this copy: ``name``, or ``name`` numbered if it is
    taken (what is there is never overwritten)."""
    stem, suffix = os.path.splitext(name)
    for number in range(1, 1000):
        path = os.path.join(directory, name if number == 1 else f"{stem}-{number}{suffix}")
        try:
            return path, os.open(path, _NEW, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "every name for it is taken", os.path.join(directory, name))


def _marks(text: str, name: str) -> bool:
    """Whether ``text`` is a capped stream named ``name`` (its marker says so)."""
    return any(match["name"] == name for match in MARKER.finditer(text))


def _os_error(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"
