"""What the sandbox may hold in all, the sessions turned away before it gets there, and the one
ended when it gets close.

Each session's workspace is a tmpfs (``sandbox._quota``): its pages are memory, and they stay
as long as the session does, whether or not a call runs. A resident worker holds what its tool
keeps between calls. Neither is bounded by how many calls run at once (``max_workers``), so
without a bound of their own many sessions, each within its own quota, would fill the host's
memory together. The bound is the engine's memory group (``sandbox._cgroups
.create_sandbox_memory``), which holds every worker of every zygote and every page they wrote
to a tmpfs: the kernel keeps it under ``limit_mb``, so the host never runs short.

Within it, one tenant must not take another's share. Reserving each session's whole quota
would leave room for a handful of sessions (the running calls' memory is most of the host's),
so sessions are admitted by what the sandbox holds, and pressure is relieved the way a kubelet
evicts. What a session holds (``Holdings``) is its workspace's pages, the memory of the worker
it keeps, and that of each call it runs now (its worker's group: its programs, their memfd
and shmem pages); a tenant (a client address or an API key for the service, else the session
itself: ``SessionState.tenant_key``) holds what its sessions do. Past ``HIGH_WATER`` of the bound
a new session, stateful or a REST request's, is refused with ``overloaded`` when its tenant
holds its fair share already (the bound divided among the tenants that hold any), and
admitted when it does not: a tenant whose idle sessions fill the sandbox turns only itself
away. Past ``PRESSURE`` the session that holds the most, of a tenant past its fair share, is
ended, its client told why, before the kernel would have to kill whatever process is largest,
another tenant's kept state perhaps; a session holding less than ``SMALL_BYTES`` never is.

Without that group (no memory cgroup here, or ``--no-cgroups``) nothing measures what the
sandbox holds: the bound is kept by reservation instead, each session with a tmpfs reserving
its whole quota, and one that would take the reservations past ``limit_mb`` is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from a2e_engine.sandbox._cgroups import memory_usage

if TYPE_CHECKING:
    from a2e_engine.engine._session import SessionState

__all__ = [
    "HIGH_WATER",
    "PRESSURE",
    "MemoryBound",
    "OverBound",
    "PressureRelief",
    "SandboxMemory",
    "derived_limit_mb",
]

log = logging.getLogger("a2e.engine")

#: The share of the bound past which new sessions are turned away.
HIGH_WATER = 0.8
#: The share of the bound past which the session holding the most is ended.
PRESSURE = 0.9
#: The share of the host's available memory the sandbox may hold by default.
SHARE_OF_MEMORY = 0.9
#: How often the pressure is looked at.
RELIEF_EVERY_S = 0.2
#: How long an ended session may take to give its memory back before the next is ended.
RELIEF_GRACE_S = 5.0
#: A session holding less than this is never ended to relieve pressure.
SMALL_BYTES = 32 << 20


class OverBound(RuntimeError):
    """A new session would take the sandbox past its memory bound."""


def derived_limit_mb(available_mb: int) -> int:
    """The bound for a host with ``available_mb`` of memory available (0: unknown, no bound)."""
    return int(available_mb * SHARE_OF_MEMORY)


class Holdings:
    """What each session holds of the sandbox's memory, and each tenant: ``sessions`` gives the
    live sessions, ``kept`` what the worker a session keeps holds (by its id), ``running``
    what the calls a session runs now hold (by its workspace)."""

    def __init__(
        self,
        sessions: Callable[[], Iterable[SessionState]],
        kept: Callable[[str], int],
        running: Callable[[str], int],
    ) -> None:
        self.sessions = sessions
        self.kept = kept
        self.running = running

    def of(self, session: SessionState) -> int:
        return session.held_bytes() + self.kept(session.id) + self.running(session.workspace)

    def by_tenant(self) -> dict[str, int]:
        held: dict[str, int] = {}
        for session in self.sessions():
            key = session.tenant_key
            held[key] = held.get(key, 0) + self.of(session)
        return held


class MemoryBound:
    """``usage``: what the engine's memory group holds, in bytes (None: there is none, and
    sessions reserve their quotas instead). ``holdings``: what sessions and tenants hold,
    once the engine knows (until then, past the high-water mark, every new session is
    refused)."""

    def __init__(self, limit_mb: int, usage: Callable[[], int] | None = None) -> None:
        self.limit_mb = limit_mb
        self.usage = usage
        self.holdings: Holdings | None = None
        self._reserved_mb = 0
        self._lock = threading.Lock()

    def held_mb(self) -> int:
        """What the group holds now, in MiB (0 without one, or when it cannot be read)."""
        return self._reading() or 0

    def _reading(self) -> int | None:
        """What the group holds now, in MiB; ``None`` without one or when it cannot be read."""
        if self.usage is None:
            return None
        try:
            return self.usage() >> 20
        except (OSError, ValueError):
            return None

    def free_mb(self) -> int:
        """What new sessions may still take, in MiB: the bound less what the group holds, or
        less what sessions reserved where there is no group (a cluster places sessions by it)."""
        if not self.limit_mb:
            return 0
        held = self._reading()
        if held is None:
            with self._lock:
                held = self._reserved_mb
        return max(0, self.limit_mb - held)

    def check(self, tenant: str = "") -> None:
        """``OverBound`` when the sandbox holds past the high-water mark and ``tenant`` holds
        its fair share of it already (any tenant, where what each holds is not known): no new
        session of its, nor a request in a session prepared ahead, until it holds less."""
        if not self.limit_mb or self.usage is None:
            return
        held_mb = self.held_mb()
        if held_mb <= self.limit_mb * HIGH_WATER:
            return
        share_mb = self.fair_share_mb(tenant)
        if share_mb is not None and share_mb[0] < share_mb[1]:
            return  # it holds less than its share: the pressure is another's
        raise OverBound(
            f"the sandbox holds {held_mb} MiB of the {self.limit_mb} MiB it may"
            + (
                f", {share_mb[0]} MiB of it yours, your share being {share_mb[1]} MiB"
                if share_mb is not None
                else ""
            )
            + "; no new session until sessions end"
        )

    def room_for(self, tenant: str = "") -> str | None:
        """``check``'s answer as a reason: None where ``tenant`` may take more."""
        try:
            self.check(tenant)
        except OverBound as exc:
            return str(exc)
        return None

    def fair_share_mb(self, tenant: str) -> tuple[int, int] | None:
        """What ``tenant`` holds and its fair share, in MiB (the bound divided among the
        tenants holding any, itself counted); None where it is not known."""
        if not tenant or self.holdings is None:
            return None
        held = self.holdings.by_tenant()
        holding = {key for key, size in held.items() if size > 0} | {tenant}
        return held.get(tenant, 0) >> 20, self.share_bytes(len(holding)) >> 20

    def share_bytes(self, tenants: int) -> int:
        """Each tenant's fair share when ``tenants`` hold memory: the high-water mark of the
        bound divided among them."""
        return int(self.limit_mb * HIGH_WATER * (1 << 20)) // max(1, tenants)

    def has_room(self) -> bool:
        """Whether a call may start beyond those that start whatever they use
        (``sandbox._slots``): only where the group's usage is known, and below the high-water
        mark."""
        held_mb = self._reading()
        if held_mb is None:
            return False  # not known: no room is assumed
        return not self.limit_mb or held_mb <= self.limit_mb * HIGH_WATER

    def admit(self, quota_mb: int, tenant: str = "") -> None:
        """Take a new session of ``tenant`` whose workspace holds up to ``quota_mb``, or
        ``OverBound`` saying why not. Give it back with ``release`` when the session ends."""
        if not self.limit_mb:
            return
        if self.usage is not None:
            self.check(tenant)
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


class PressureRelief:
    """On the engine's loop, while it runs: past ``PRESSURE`` of the bound, end the session
    that holds the most among the tenants past their fair share, one at a time (the next only
    once the last one's memory came back, or ``RELIEF_GRACE_S`` passed)."""

    def __init__(self, bound: MemoryBound, holdings: Holdings) -> None:
        self.bound = bound
        self.holdings = holdings
        self.ended: list[str] = []  # why each session it ended was, for the log and tests
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.bound.limit_mb and self.bound.usage is not None:
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        waiting_until = 0.0
        while True:
            await asyncio.sleep(RELIEF_EVERY_S)
            pressed = self.bound.held_mb() > self.bound.limit_mb * PRESSURE
            if not pressed or loop.time() < waiting_until:
                continue
            waiting_until = loop.time() + RELIEF_GRACE_S if self.relieve() else 0.0

    def relieve(self) -> bool:
        """End the session that holds the most of those of a tenant past its fair share, and
        not little; whether one was."""
        tenants = {key: size for key, size in self.holdings.by_tenant().items() if size > 0}
        if not tenants:
            return False
        share = self.bound.share_bytes(len(tenants))
        held = [
            (self.holdings.of(session), session)
            for session in self.holdings.sessions()
            if session.evict is not None and tenants.get(session.tenant_key, 0) > share
        ]
        held = [(size, session) for size, session in held if size >= SMALL_BYTES]
        if not held:
            return False
        size, session = max(held, key=lambda pair: pair[0])
        why = (
            f"the sandbox ran short of memory ({self.bound.held_mb()} MiB of the "
            f"{self.bound.limit_mb} MiB it may hold) and this session held the most "
            f"({size >> 20} MiB)"
        )
        log.warning("ending session %s: %s", session.id[:8], why)
        self.ended.append(why)
        assert session.evict is not None
        session.evict(why)
        return True


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
