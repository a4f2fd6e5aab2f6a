"""Layer ``no_capabilities``: a worker holds no capability when tool code runs.

Why: a uid-0 worker with capabilities could bypass file permissions, reconfigure the network,
signal or read other users' processes; without them, and with an empty bounding set and
``no_new_privs`` (set with the seccomp filter), setuid programs give nothing back.

How: the zygote empties the bounding and ambient sets once, before it forks anyone (a fork
copies them; the zygote keeps its own effective capabilities). Each worker drops the rest as
the last step before seccomp, keeping only ``CAP_SETUID`` and ``CAP_SETGID`` when it must still
become its session's uid (``sandbox._identity``), which then takes those too.
"""

from __future__ import annotations

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker

__all__ = ["LAYER"]


class NoCapabilities(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote, once: empty the sets every worker inherits (41 ``prctl`` calls
        each)."""
        syscalls.empty_inherited_capability_sets()
        prep.report("no_capabilities", None)

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker: keep nothing, or only what changing to the session's uid needs."""
        keep = (syscalls.CAP_SETUID, syscalls.CAP_SETGID) if prep.change_identity else ()
        syscalls.keep_only_capabilities(keep)


LAYER = NoCapabilities()
