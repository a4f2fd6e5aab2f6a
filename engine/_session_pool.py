"""``SessionPool``: sessions prepared ahead for requests that keep nothing.

A REST call, a ``/run_code`` request or an MCP call without a session of its own needs a session
for the length of one request: a workspace (with its quota's tmpfs), a tmp directory, and a uid
of its own. Making one (a mount, propagated to every worker's mount namespace, directories,
``chown``) and taking it down (an unmount, which waits out the kernel's RCU grace period) costs
about half a millisecond of the supervisor's CPU and more of the request's time. The pool keeps
``size`` ready and hands each to one request at a time:

* a session is leased to one request, never two at once;
* once the request is done and its last call has ended (its worker and the worker's whole
  process tree gone: the sandbox's calls end only then), it is wiped (``SessionState.wipe``:
  everything beneath its root removed through descriptors, the workspace and tmp made anew)
  and ready again, with the same directory, tmpfs and uid. Nothing of one request reaches the
  next: no file, no process, no byte of the quota. Where a wipe fails, the session is ended and
  a new one made.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

from a2e_engine.engine._policy import Policy
from a2e_engine.engine._session import SessionState
from a2e_engine.engine._sessions import Sessions

__all__ = ["SessionPool"]

log = logging.getLogger("a2e.host")

#: How long a request waits for a session being wiped before one is made for it (a wipe takes
#: well under a millisecond; one whose last call is still being killed takes longer).
RECYCLE_WAIT_S = 0.02


class SessionPool:
    """Runs on the engine's loop."""

    def __init__(self, sessions: Sessions, size: int, capabilities: frozenset[str]) -> None:
        self.sessions = sessions
        self.size = size  # how many it keeps, ready or leased
        self.capabilities = capabilities
        self._ready: collections.deque[SessionState] = collections.deque()
        self._filling: asyncio.Task[None] | None = None
        self._recycling: set[asyncio.Task[None]] = set()
        self._leased = 0  # handed out, and not back and wiped yet
        self.closed = False

    @property
    def ready(self) -> int:
        return len(self._ready)

    async def take(self, client: str, policies: list[Policy], tenant: str = "") -> SessionState:
        """A ready session; with none ready, the first one wiped within ``RECYCLE_WAIT_S``, or
        one made now; ``UidsExhausted``, ``OverBound`` or ``OSError`` when none can be had
        (a request past the sandbox's memory bound is refused too, as a new session is).
        The pool refills behind it."""
        self.sessions.bound.check(tenant)
        if not self._ready and self._recycling:  # one being wiped comes back in a moment
            await asyncio.wait(
                self._recycling, timeout=RECYCLE_WAIT_S, return_when=asyncio.FIRST_COMPLETED
            )
        session = self._ready.popleft() if self._ready else None
        if session is None:
            session = await self.sessions.open(client, self.capabilities, [], tenant)
        self._leased += 1
        session.client = client
        session.policies = list(policies)
        session.tenant = tenant
        self.fill()
        return session

    def _short(self) -> bool:
        """Fewer than ``size`` sessions, ready and leased together."""
        return len(self._ready) + self._leased < self.size

    def fill(self) -> None:
        """Make sessions until ``size`` are ready or leased, one at a time, in the
        background."""
        if self.closed or self._filling is not None or not self._short():
            return
        self._filling = asyncio.get_running_loop().create_task(self._fill())

    async def _fill(self) -> None:
        try:
            while not self.closed and self._short():
                try:
                    session = await self.sessions.open("pool", self.capabilities, [])
                except Exception as exc:  # no uid or no room now: the next take makes one
                    log.warning("the session pool could not prepare a session: %s", exc)
                    return
                if self.closed:
                    self.sessions.end(session)
                    return
                self._ready.append(session)
        finally:
            self._filling = None

    def give_back(self, session: SessionState, calls: list[asyncio.Task[Any]]) -> None:
        """A leased session, after its request: wiped once ``calls`` have ended, then ready
        again (or ended, when the pool is full, closed, or the wipe fails)."""
        task = asyncio.get_running_loop().create_task(self._recycle(session, calls))
        self._recycling.add(task)
        task.add_done_callback(self._recycling.discard)

    async def _recycle(self, session: SessionState, calls: list[asyncio.Task[Any]]) -> None:
        if calls:
            await asyncio.wait(calls)
        await self.sessions.retire_workers(session)
        wiped = False
        if not self.closed:
            try:
                if not session.untouched():  # most requests leave nothing: no wipe needed
                    await asyncio.get_running_loop().run_in_executor(None, session.wipe)
                wiped = True
            except OSError as exc:
                log.warning("a pooled session could not be wiped, so it ends: %s", exc)
        self._leased -= 1  # counted until now, so that nothing is made in its place meanwhile
        session.tenant = ""
        if wiped and not self.closed and self._short():
            self._ready.append(session)
            return
        self.sessions.end(session)
        self.fill()

    async def close(self) -> None:
        """End the sessions still ready (and stop preparing more)."""
        self.closed = True
        pending = [*self._recycling, *([self._filling] if self._filling is not None else [])]
        if pending:
            await asyncio.wait(pending)
        while self._ready:
            self.sessions.end(self._ready.popleft())
