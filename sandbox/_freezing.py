"""Pausing a session: every process of its workers frozen where they stand, and thawed later.

Each worker has a freezer cgroup slot of its own (``sandbox._cgroups``), which holds
everything it started, however it started it; freezing it stops them all at once, and they
hold no CPU until thawed (cgroup v1's freezer is hierarchical: a run's case group beneath the
slot freezes with it). Without a freezer hierarchy, the workers themselves are stopped with
``SIGSTOP`` and what they started is not (``freeze`` says which it did).

A frozen process cannot be killed until it is thawed (v1): whoever ends a paused session
thaws it first.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable

from a2e_engine.sandbox._cgroups import SLOT_PREFIX, cgroup_root, own_path

__all__ = ["freeze"]

_STATES = {True: b"FROZEN", False: b"THAWED"}


def freeze(pids: Iterable[int], frozen: bool) -> str:
    """Each worker ``pids`` names (as this process sees them) frozen, or thawed: by its
    freezer slot (``"freezer"``), or by a signal where it has none (``"signals"``)."""
    how = "freezer"
    for pid in pids:
        if not _by_group(pid, frozen):
            how = "signals"
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP if frozen else signal.SIGCONT)
    return how


def _by_group(pid: int, frozen: bool) -> bool:
    """Whether ``pid``'s freezer slot (never another group: the supervisor's own, say) took
    the new state."""
    try:
        path = own_path("freezer", pid)
    except OSError:
        return False
    if not os.path.basename(path).startswith(SLOT_PREFIX):
        return False
    state = os.path.join(cgroup_root(), "freezer", path.lstrip("/"), "freezer.state")
    try:
        fd = os.open(state, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.write(fd, _STATES[frozen])
    finally:
        os.close(fd)
    return True
