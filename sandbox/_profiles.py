"""The sandbox profiles a tool runs under: what its worker may do beyond computing.

``compute`` may neither start processes nor open sockets; ``process`` may start processes;
``network`` may also open sockets; ``session`` is ``compute`` for an interpreter a session keeps,
which may fork itself (no exec) and take a user and mount namespace of its own in the child:
the engine copies a sandbox that way (``sandbox._forks``). The seccomp filter of each
(``sandbox._seccomp``) and whether its workers join the empty network namespace
(``sandbox._network``) follow from them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "SeccompProfile"]


@dataclass(frozen=True)
class SeccompProfile:
    name: str
    allow_processes: bool
    allow_sockets: bool
    #: fork without exec, and ``unshare(CLONE_NEWUSER | CLONE_NEWNS)``, nothing else of either
    forkable: bool = False


PROFILES: dict[str, SeccompProfile] = {
    "compute": SeccompProfile("compute", allow_processes=False, allow_sockets=False),
    "process": SeccompProfile("process", allow_processes=True, allow_sockets=False),
    "network": SeccompProfile("network", allow_processes=True, allow_sockets=True),
    "session": SeccompProfile("session", allow_processes=False, allow_sockets=False, forkable=True),
}
