"""What the sandbox may hold in all, and the sessions turned away before it gets there.

Each session's workspace is a tmpfs (``sandbox._quota``): its pages are memory, and they stay
as long as the session does, whether or not a call runs. A resident worker holds what its tool
keeps between calls. Neither is bounded by how many calls run at once (``max_workers``), so
without a bound of their own many sessions, each within its own quota, would fill the host's
memory together. The bound is the engine's memory group (``sandbox._cgroups
.create_sandbox_memory``), which holds every worker of every zygote and every page they wrote
to a tmpfs: the kernel keeps it under ``limit_mb`` (past it, the largest process inside is
killed, never a process of the host), and a new session is refused with ``overloaded`` once
it holds more than ``HIGH_WATER`` of it, so that the sessions already open keep room to work.

Without that group (no memory cgroup here, or ``--no-cgroups``) the same bound is kept by
reservation: each session with a tmpfs reserves its whole quota, and one that would take the
reservations past ``limit_mb`` is refused.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from a2e_engine.sandbox._cgroups import memory_usage

__all__ = ["HIGH_WATER", "MemoryBound", "OverBound", "SandboxMemory", "derived_limit_mb"]

#: The share of the bound past which new sessions are turned away.
HIGH_WATER = 0.8
#: The share of the host's available memory the sandbox may hold by default.
SHARE_OF_MEMORY = 0.9


class OverBound(RuntimeError):
    """A new session would take the sandbox past its memory bound."""


def derived_limit_mb(available_mb: int) -> int:
    """The bound for a host with ``available_mb`` of memory available (0: unknown, no bound)."""
    return int(available_mb * SHARE_OF_MEMORY)


class MemoryBound:
    """``usage``: what the engine's memory group holds, in bytes (None: there is none, and
    sessions reserve their quotas instead)."""

    def __init__(self, limit_mb: int, usage: Callable[[], int] | None = None) -> None:
        self.limit_mb = limit_mb
        self.usage = usage
        self._reserved_mb = 0
        self._lock = threading.Lock()

    def admit(self, quota_mb: int) -> None:
        """Take a new session whose workspace holds up to ``quota_mb``, or ``OverBound`` saying
        why not. Give it back with ``release`` when the session ends."""
        if not self.limit_mb:
            return
        if self.usage is not None:
            try:
                held_mb = self.usage() >> 20
            except (OSError, ValueError):
                held_mb = 0
            if held_mb > self.limit_mb * HIGH_WATER:
                raise OverBound(
                    f"the sandbox holds {held_mb} MiB of the {self.limit_mb} MiB it may; "
                    "no new session until sessions end"
                )
            return
        with self._lock:
            if self._reserved_mb + quota_mb > self.limit_mb:
                raise OverBound(
                    f"the open sessions' workspaces may hold {self._reserved_mb} MiB of the "
                    f"{self.limit_mb} MiB the sandbox may; no new session of {quota_mb} MiB "
                    "until sessions end"
                )
            self._reserved_mb += quota_mb

    def release(self, quota_mb: int) -> None:
        """A session admitted with ``quota_mb`` ended."""
        if self.limit_mb and self.usage is None:
            with self._lock:
                self._reserved_mb = max(0, self._reserved_mb - quota_mb)


@dataclass(frozen=True)
class SandboxMemory:
    """The bound the engine keeps, and its memory group (empty: none could be made)."""

    limit_mb: int
    group: str = ""

    def bound(self, held: bool) -> MemoryBound:
        """How new sessions are admitted: by what the group holds, where the zygotes' memory
        cgroups are in it (``held``); else by reservation."""
        usage = functools.partial(memory_usage, self.group) if held and self.group else None
        return MemoryBound(self.limit_mb, usage)
