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

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker
from a2e_engine.sandbox._probe import namespace_made_in_child
from a2e_engine.sandbox._profiles import PROFILES

__all__ = ["LAYER"]


class NetworkNamespace(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote: the empty namespace's fd for workers to join; none when the zygote
        is in it already, or there is no namespace (reported why)."""
        profiles = prep.settings.profiles
        closed = [p for p in profiles if not PROFILES[p].allow_sockets]
        try:
            fd = namespace_made_in_child("net", lambda: syscalls.unshare(syscalls.CLONE_NEWNET))
        except OSError as exc:
            prep.report("network_namespace", f"cannot create one: {exc.strerror}")
            return
        if closed and len(closed) < len(profiles):
            prep.report("network_namespace", None, profiles=closed, joined_by="workers")
            prep.empty_net_fd = fd
            return
        try:
            if closed:
                syscalls.setns(fd, syscalls.CLONE_NEWNET)
        finally:
            os.close(fd)
        joined_by = "zygote" if closed else ""
        prep.report("network_namespace", None, profiles=closed, joined_by=joined_by)

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker, first: a closed profile's joins the empty namespace."""
        if prep.empty_net_fd is not None and not PROFILES[worker.profile].allow_sockets:
            syscalls.setns(prep.empty_net_fd, syscalls.CLONE_NEWNET)


LAYER = NetworkNamespace()
