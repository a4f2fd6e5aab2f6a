"""Layer ``user_namespace``: a user namespace for engines that do not run as root.

Why: without privileges the kernel refuses every namespace but one, the user namespace; inside
it the zygote holds capabilities over namespaces it creates itself, so an unprivileged engine
gets the same PID, mount, IPC and network isolation as a root one (not cgroups, quotas or a uid
per session: only the engine's own uid is mapped).

How: the zygote unshares a user namespace (its own uid and gid mapped to 0) and a PID namespace
together, then forks once. The child, pid 1 of a PID namespace *owned by the new user
namespace*, becomes the real zygote: only from there can it return to its own PID namespace
after creating one per worker (``sandbox._namespaces.PidNamespaces``), which it could not do in
the host's. The parent just waits and exits as the child did; if the parent is killed, the
child follows (parent-death signal), and every worker with it.
"""

from __future__ import annotations

import os
import signal

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._preparation import Layer, Preparation
from a2e_engine.sandbox._settings import ZygoteSettings

__all__ = ["LAYER", "enter", "enter_user_namespace", "host_pid"]


def enter(settings: ZygoteSettings) -> str:
    """Enter the user namespace where one is wanted, first of all (the zygote's own process
    may change here). ``""`` once the zygote runs in one; else why it does not."""
    if os.geteuid() == 0:
        return "running as root: not needed"
    if not settings.isolation.namespaces:
        return "disabled by configuration"
    return enter_user_namespace() or ""


class UserNamespace(Layer):
    def prepare(self, prep: Preparation) -> None:
        """Report what ``enter`` chose, and tell the later layers what it means for them."""
        prep.in_user_namespace = prep.userns_reason == ""
        prep.report("user_namespace", prep.userns_reason or None)


LAYER = UserNamespace()


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def enter_user_namespace() -> str | None:
    """Become the zygote inside a fresh user + PID namespace. ``None`` on success (in the
    child); else why not, and nothing changed. The parent never returns."""
    uid, gid = os.getuid(), os.getgid()
    try:
        syscalls.unshare(syscalls.CLONE_NEWUSER | syscalls.CLONE_NEWPID)
    except OSError as exc:
        return f"unprivileged user namespaces are refused here: {exc.strerror}"
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    except OSError as exc:
        # The user namespace exists but is unusable: nothing can be undone, so fail loudly.
        raise OSError(exc.errno, f"cannot map our uid into the user namespace: {exc}") from None
    pid = os.fork()
    if pid == 0:
        syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
        return None
    signal.signal(signal.SIGTERM, lambda *_: os.kill(pid, signal.SIGKILL))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)


def host_pid() -> int:
    """Our pid as the host (and the supervisor) sees it: ``/proc`` is still the host's."""
    return int(os.readlink("/proc/self"))
