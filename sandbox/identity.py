"""Identity: a call runs as its session's own unprivileged uid and gid, never as root.

Why: a uid-0 worker without capabilities is still the *owner* of every root-owned file, so it
can read ``/etc/shadow`` and anything else root may read under the allowed system paths; and
calls of two sessions would share one identity. With a uid per session, plain file permissions
keep root's files and other sessions' workspaces (``0700``, owned by their own uid) out of
reach, and ``RLIMIT_NPROC`` finally means something.

How: the worker keeps only ``CAP_SETUID`` and ``CAP_SETGID`` while it waits for a job, and
changes to the job's uid and gid before any tool code runs; once no uid of the process is 0 the
kernel clears those two capabilities as well. The Python installation must stay readable to
that uid: where it lives under a directory others may not enter (pyenv under ``/root``, mode
``0700``), the worker's own mount namespace covers that directory with an empty tmpfs and binds
back only the entries on the way to the interpreter. Everything else in it stays hidden.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from a2e_engine.sandbox import syscalls
from a2e_engine.sandbox.probe import Answer, ProbeFailed, in_child

__all__ = [
    "DEFAULT_UID_RANGE",
    "Crossing",
    "become",
    "closed_ancestors",
    "open_the_way",
    "probe_identity",
]

#: Unnamed ids (no ``/etc/passwd`` entry): far above login users, system users and the usual
#: ``/etc/subuid`` ranges. The gid of a session is its uid.
DEFAULT_UID_RANGE = (1_500_000_000, 4096)


@dataclass(frozen=True)
class Crossing:
    """A directory others may not enter, and the entries in it that must stay reachable."""

    directory: str
    entries: tuple[str, ...]


def closed_ancestors(paths: Iterable[str]) -> list[Crossing]:
    """Directories on the way to ``paths`` that an unprivileged uid could not pass, outermost
    first, each with the entries to keep. Computed once in the zygote."""
    needed: dict[str, set[str]] = {}
    for path in paths:
        path = os.path.abspath(path)
        parent = "/"
        for part in path.strip("/").split("/"):
            if not part:
                break
            try:
                mode = os.stat(parent).st_mode
            except OSError:
                break
            if not mode & stat.S_IXOTH:
                needed.setdefault(parent, set()).add(part)
            parent = os.path.join(parent, part)
    ordered = sorted(needed, key=lambda d: (d.count("/"), d))
    return [Crossing(d, tuple(sorted(needed[d]))) for d in ordered]


def open_the_way(crossings: list[Crossing]) -> None:
    """In the worker's own mount namespace (before it is made read-only): cover each closed
    directory with an empty tmpfs anyone may enter, and bind back only the entries needed.

    Outermost first: the entries of a deeper crossing are opened through the binds of the one
    above it. Each entry is opened (``O_PATH``) before its directory is covered, then bound from
    ``/proc/self/fd``.
    """
    for crossing in crossings:
        held: list[tuple[str, int, bool]] = []
        try:
            for entry in crossing.entries:
                path = os.path.join(crossing.directory, entry)
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                held.append((entry, fd, os.path.isdir(f"/proc/self/fd/{fd}")))
            syscalls.mount(
                "tmpfs",
                crossing.directory,
                "tmpfs",
                syscalls.MS_NOSUID | syscalls.MS_NODEV | syscalls.MS_NOEXEC,
                "mode=755,size=64k",
            )
            for entry, fd, is_dir in held:
                target = os.path.join(crossing.directory, entry)
                if is_dir:
                    os.mkdir(target, 0o755)
                else:
                    os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
                syscalls.mount(
                    f"/proc/self/fd/{fd}", target, None, syscalls.MS_BIND | syscalls.MS_REC
                )
        finally:
            for _, fd, _ in held:
                os.close(fd)


def become(uid: int, gid: int) -> None:
    """Change to ``uid``/``gid`` for good (real, effective, saved; no supplementary groups),
    and check that no capability survived the change."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if syscalls.permitted_capabilities():
        raise PermissionError("capabilities survived the change of uid")


def probe_identity(
    crossings: list[Crossing], read: Iterable[str], enter: Iterable[str], uid: int
) -> str | None:
    """Try the change of identity once in a throw-away child. ``None`` if ``uid`` can then read
    every path of ``read`` and pass through every directory of ``enter``; else why not."""
    wanted = [(p, os.R_OK) for p in read if os.path.exists(p)]
    wanted += [(p, os.X_OK) for p in enter if os.path.exists(p)]
    if os.geteuid() != 0:
        return "not running as root: there is no other uid to become"

    def become_and_look() -> Answer:
        if crossings:
            syscalls.unshare(syscalls.CLONE_NEWNS)
            syscalls.mount("none", "/", None, syscalls.MS_REC | syscalls.MS_PRIVATE)
            open_the_way(crossings)
        become(uid, uid)
        unreachable = [p for p, mode in wanted if not os.access(p, mode)]
        if unreachable:
            return Answer(f"uid {uid} cannot reach {', '.join(unreachable[:3])}")
        return Answer()

    try:
        return in_child(become_and_look).text or None
    except ProbeFailed as exc:
        return str(exc)
