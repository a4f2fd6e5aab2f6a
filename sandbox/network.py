"""Layer ``network_namespace``: tools without the network profile have no network at all.

Why: on top of the seccomp rule against ``socket()``, such a worker has no route anywhere even
if a socket slipped through: it lives in a network namespace with nothing but a down loopback.

How: the zygote creates that one empty namespace once (creating one takes a global kernel lock:
too dear per call). A zygote whose tools all go without the network joins it itself, and its
workers are forked inside it; a zygote that also forks workers with the network keeps it alive
by an fd, and each worker of a closed profile joins it first thing, before it closes the fds it
inherited.
"""

from __future__ import annotations

import os

from a2e_engine.sandbox import syscalls
from a2e_engine.sandbox.preparation import Preparation
from a2e_engine.sandbox.probe import namespace_made_in_child
from a2e_engine.sandbox.profiles import PROFILES

__all__ = ["enter", "for_profile", "prepare"]


def prepare(prep: Preparation) -> int | None:
    """In the zygote: the empty namespace's fd for workers to join, or ``None`` (no namespace,
    reported why, or the zygote is in it already)."""
    closed = [p for p in prep.settings.profiles if not PROFILES[p].allow_sockets]
    try:
        fd = namespace_made_in_child("net", lambda: syscalls.unshare(syscalls.CLONE_NEWNET))
    except OSError as exc:
        prep.report("network_namespace", f"cannot create one: {exc.strerror}")
        return None
    if closed and len(closed) < len(prep.settings.profiles):
        prep.report("network_namespace", None, profiles=closed, joined_by="workers")
        return fd
    try:
        if closed:
            syscalls.setns(fd, syscalls.CLONE_NEWNET)
    finally:
        os.close(fd)
    prep.report("network_namespace", None, profiles=closed, joined_by="zygote" if closed else "")
    return None


def for_profile(namespace_fd: int | None, profile: str) -> int | None:
    """What a worker of ``profile`` joins: the empty namespace, unless it may use sockets."""
    return None if PROFILES[profile].allow_sockets else namespace_fd


def enter(namespace_fd: int | None) -> None:
    """In the worker, first: join the empty namespace (``None``: a profile with a network)."""
    if namespace_fd is not None:
        syscalls.setns(namespace_fd, syscalls.CLONE_NEWNET)
