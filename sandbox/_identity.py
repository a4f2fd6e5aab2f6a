"""Layer ``identity``: a call runs as its session's own unprivileged uid and gid, never as root.

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
import signal
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._landlock import SYSTEM_READ_PATHS
from a2e_engine.sandbox._messages import Job
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker
from a2e_engine.sandbox._probe import Answer, ProbeFailed, in_child

__all__ = ["LAYER", "Crossing", "become", "closed_ancestors", "open_the_way", "probe_identity"]


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


class Identity(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote: whether calls run as their session's uid (reported, why not if
        not), and the closed directories on the way to what that uid must reach, for the
        workers' mount template to open. It must be root, and the interpreter and the state
        directory stay reachable for that uid (through the workers' mount namespace, when
        there are ways to open)."""
        settings = prep.settings
        if not settings.isolation.identity:
            prep.report("identity", "disabled by configuration")
            return
        if prep.in_user_namespace:
            prep.report("identity", "not root: the user namespace maps only the engine's uid")
            return
        ways = tuple(closed_ancestors([*_reached(prep), *settings.writable_paths]))
        if ways and prep.pidns is None:
            closed = ", ".join(c.directory for c in ways)
            prep.report(
                "identity",
                f"{closed} may not be entered by other users and there is no mount namespace "
                "to open the way to the interpreter",
            )
            return
        uid = settings.isolation.uid_range[0]
        why_not = probe_identity(list(ways), _reached(prep), settings.writable_paths, uid)
        prep.report("identity", why_not, first_uid=uid, opened=[c.directory for c in ways])
        prep.change_identity = why_not is None
        if why_not is None and ways:
            prep.identity_ways = ways
            prep.need_mounts.append(self)  # the mount template opens the ways

    def withdraw(self, prep: Preparation, why: str) -> None:
        prep.change_identity = False
        prep.identity_ways = ()
        prep.report("identity", why)

    def rehearse(self, prep: Preparation, worker: Worker) -> None:
        """The capability check that follows the change of uid (ctypes resolves it once)."""
        if prep.change_identity:
            syscalls.permitted_capabilities()

    def on_job(self, prep: Preparation, worker: Worker, job: Job) -> None:
        """In the worker, first once the job is known: become the session's uid. (Root
        without capabilities could not even open the session's workspace for Landlock's
        rule.)"""
        if not prep.change_identity:
            return
        uid = job.get("uid")
        if not isinstance(uid, int) or isinstance(uid, bool) or uid <= 0:
            raise PermissionError("calls here run as a session uid; the job names none")
        parent = os.getppid()
        become(uid, uid)
        # The kernel clears the parent-death signal when credentials change: without setting
        # it again, a worker in the middle of its job would outlive a zygote killed outright.
        syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(0)  # the zygote died in between: nobody is waiting for the job's result


LAYER = Identity()


def _reached(prep: Preparation) -> list[str]:
    return [*SYSTEM_READ_PATHS, *prep.code_paths, *prep.settings.read_roots]


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
