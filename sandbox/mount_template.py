"""The mount namespace every worker starts from, built once by the zygote.

A worker needs a mount namespace of its own: its ``/proc`` shows only its PID namespace and its
``/tmp`` dies with it. Built from the host's each time, that namespace cost a worker about 1 ms
of CPU, and most of it was the same every time: private propagation, a minimal ``/dev``, the
closed directories on the way to the interpreter opened, every mount but the writable paths
made read-only. The zygote now builds that part once, in a template namespace that an fd keeps
alive (as it keeps the empty network namespace). A worker enters the template and unshares a
copy of its own: a copy keeps each mount's flags and propagation (read-only stays read-only,
the receive roots stay slaves of the host's mounts, so later session mounts still arrive), and
nothing the worker mounts in its copy reaches the template or another worker. It then adds only
what is its own: ``/proc`` and a fresh ``/tmp``.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2e_engine.sandbox import syscalls
from a2e_engine.sandbox.identity import Crossing, open_the_way
from a2e_engine.sandbox.namespaces import (
    TmpBind,
    make_filesystem_read_only,
    mount_minimal_dev,
    mount_private_tmp,
    mount_proc,
    namespace_made_in_child,
    own_mount_namespace,
)

__all__ = ["create_mount_template", "enter_copy_of_template", "enter_worker_mounts"]


def create_mount_template(
    receive: tuple[str, ...], crossings: Sequence[Crossing], writable: tuple[str, ...]
) -> int:
    """An fd to the template namespace. Raises ``OSError`` saying why it cannot be made."""

    def prepare() -> None:
        own_mount_namespace(receive)
        mount_minimal_dev()
        open_the_way(list(crossings))
        make_filesystem_read_only(writable)

    return namespace_made_in_child("mnt", prepare)


def enter_worker_mounts(template_fd: int, tmp_mb: int, binds: tuple[TmpBind, ...]) -> None:
    """In the worker (pid 1 of its PID namespace, still privileged): a private copy of the
    template, its own IPC namespace, ``/proc`` and a fresh ``/tmp`` with ``binds`` bound back.

    What is bound back keeps the flags it has in the template: code read-only, the writable
    paths writable without device nodes or setuid programs. The fresh ``/tmp`` is writable."""
    enter_copy_of_template(template_fd)
    mount_private_tmp(tmp_mb, binds)


def enter_copy_of_template(template_fd: int) -> None:
    """A private copy of the template, an IPC namespace of our own, ``/proc``."""
    syscalls.setns(template_fd, syscalls.CLONE_NEWNS)
    syscalls.unshare(syscalls.CLONE_NEWNS | syscalls.CLONE_NEWIPC)
    mount_proc()
