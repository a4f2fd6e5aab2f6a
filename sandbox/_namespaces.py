"""Layer ``pid_namespace``: a fresh PID namespace per worker.

Why: when the worker (pid 1 of its namespace) dies, the kernel kills every process left in the
namespace, including one that double-forked and called ``setsid``. Nothing a call started can
outlive it. Its mount namespace (``sandbox._mount_template``) gives it the ``/proc`` of that
namespace, which hides every process outside the call.

How: ``unshare(CLONE_NEWPID)`` only affects the *next* children of the caller and may be called
once per namespace, so before each fork the zygote unshares, forks, and ``setns`` back to its
own namespace, ready for the next one, when a worker is pre-forked, off the call's path. The
probe tries the whole sequence, mount namespace included, once.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._mount_template import make_filesystem_read_only, mount_private_proc
from a2e_engine.sandbox._preparation import Layer, Preparation
from a2e_engine.sandbox._probe import ProbeFailed, in_child

__all__ = ["LAYER", "PidNamespaces", "probe_pid_namespaces"]


@dataclass
class PidNamespaces:
    """Zygote-side helper that puts each forked child in a new PID namespace."""

    own_ns_fd: int

    @classmethod
    def open(cls) -> PidNamespaces:
        return cls(os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC))

    def before_fork(self) -> None:
        syscalls.unshare(syscalls.CLONE_NEWPID)

    def after_fork_in_parent(self) -> None:
        syscalls.setns(self.own_ns_fd, syscalls.CLONE_NEWPID)

    def close(self) -> None:
        os.close(self.own_ns_fd)


class PidNamespace(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote: the helper it forks with, or none (reported why). Workers need the
        mount template with it (``sandbox._mount_template``)."""
        why_not = (
            probe_pid_namespaces()
            if prep.settings.isolation.namespaces
            else "disabled by configuration"
        )
        prep.report("pid_namespace", why_not)
        prep.no_pidns = why_not or ""
        if why_not is None:
            prep.pidns = PidNamespaces.open()
            prep.need_mounts.append(self)

    def before_fork(self, prep: Preparation) -> None:
        """The next child is pid 1 of a namespace of its own."""
        if prep.pidns is not None:
            prep.pidns.before_fork()

    def after_fork(self, prep: Preparation) -> None:
        if prep.pidns is not None:
            prep.pidns.after_fork_in_parent()

    def withdraw(self, prep: Preparation, why: str) -> None:
        if prep.pidns is not None:
            prep.pidns.close()
            prep.pidns = None
        prep.no_pidns = why
        prep.report("pid_namespace", why)


LAYER = PidNamespace()


def probe_pid_namespaces() -> str | None:
    """Try the whole sequence once in a throw-away child. ``None`` if it works, else why not."""
    try:
        ns = PidNamespaces.open()
    except OSError as exc:
        return f"cannot open /proc/self/ns/pid: {exc.strerror}"
    try:
        try:
            ns.before_fork()
        except OSError as exc:
            return f"unshare(CLONE_NEWPID) refused: {exc.strerror} (needs root or a user namespace)"
        try:
            in_child(_a_worker_s_namespaces)
        except ProbeFailed as exc:
            return f"a private /proc or a read-only mount tree failed in a new namespace: {exc}"
        finally:
            ns.after_fork_in_parent()
        return None
    finally:
        ns.close()


def _a_worker_s_namespaces() -> None:
    """In the probe's child, the first of a new PID namespace."""
    mount_private_proc()
    if os.getpid() != 1:
        raise OSError(errno.EINVAL, "the child is not pid 1 of its new PID namespace")
    make_filesystem_read_only(())
