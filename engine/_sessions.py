"""``Sessions``: the live sessions of an engine, opened at a handshake, ended with their
connection once their last call is done.

Each session gets an unguessable id, a directory in the state directory (a tmpfs of its own
where quotas are on, behind a directory of the session's uid: ``SessionState.guard``) named by
another unguessable name, which nothing ties to the id (a worker sees every live session's
tmpfs in its mount table, and can reach none but its own), and, with the identity layer, a
uid of its own for its calls.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from a2e_engine.engine._identities import SessionUids
from a2e_engine.engine._memory_bound import MemoryBound
from a2e_engine.engine._policy import Policy
from a2e_engine.engine._session import SessionState
from a2e_engine.sandbox._quota import SESSION_MOUNT

__all__ = ["Sessions"]


class Sessions:
    def __init__(
        self,
        state_dir: str,
        uids: SessionUids | None,
        quota_mb: int,
        end_workers: Callable[[str], Awaitable[None]] | None = None,
        dirs_held: Callable[[str], Awaitable[None] | None] | None = None,
        bound: MemoryBound | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.uids = uids  # None: calls run as the engine's own uid
        self.quota_mb = quota_mb  # each session's directory is a tmpfs of this size (0: none)
        #: What the sandbox may hold in all: a new session past it is refused.
        self.bound = bound or MemoryBound(0)
        #: Every session opened and not yet removed, by id.
        self.live: dict[str, SessionState] = {}
        #: Ends the worker a session keeps (``engine._resident_workers``), given its id.
        self.end_workers = end_workers
        #: What a session's directories wait for before they go (``ResidentWorkers``).
        self.dirs_held = dirs_held
        self._ending: set[asyncio.Task[None]] = set()

    async def open(
        self,
        client: str,
        capabilities: frozenset[str],
        policies: list[Policy],
        tenant: str = "",
    ) -> SessionState:
        """A new session with its directories, made in a thread of the loop's chores (a mount
        and its propagation take a while, and the loop must not wait); ``UidsExhausted``,
        ``OverBound`` or ``OSError`` if none can be had now (``tenant``'s share of the
        sandbox's memory counts there: ``engine._memory_bound``)."""
        return await self._with_dirs(self._new(client, capabilities, policies, tenant))

    async def open_copy(self, parent: SessionState) -> SessionState:
        """A new session for a copy of ``parent`` (a forked sandbox): its client, capabilities,
        policies, tenant, ``lasting`` and ``home``; a uid of its own, and a hold on its
        family's (``family_uid``, the uid its copied interpreter keeps: no other session may
        have it while the copy lives); directories of its own, empty (the caller copies what
        it needs)."""
        session = self._new(
            parent.client, parent.capabilities, list(parent.policies), parent.tenant
        )
        family = parent.family_uid if parent.family_uid is not None else parent.uid
        if self.uids is not None and family is not None:
            session.family_uid = self.uids.share(family)
        session.lasting, session.home = parent.lasting, parent.home
        return await self._with_dirs(session)

    async def _with_dirs(self, session: SessionState) -> SessionState:
        """``session`` once its directories are made; given back if they cannot be."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, session.create_dirs)
        except BaseException:
            self._release(session)
            await loop.run_in_executor(None, session.remove_dirs)
            raise
        return session

    def _new(
        self, client: str, capabilities: frozenset[str], policies: list[Policy], tenant: str
    ) -> SessionState:
        self.bound.admit(self.quota_mb, tenant)
        try:
            uid = self.uids.take() if self.uids is not None else None
        except BaseException:
            self.bound.release(self.quota_mb)
            raise
        session = SessionState(
            client=client,
            capabilities=capabilities,
            policies=policies,
            id=uuid.uuid4().hex,
            root=os.path.join(self.state_dir, uuid.uuid4().hex, SESSION_MOUNT),
            uid=uid,
            quota_mb=self.quota_mb,
            tenant=tenant,
        )
        self.live[session.id] = session
        return session

    def end(self, session: SessionState, after: Iterable[asyncio.Task[Any]] = ()) -> None:
        """On the engine's loop: remove the session's directories once ``after`` are done."""
        calls = list(after)

        async def remove() -> None:
            if calls:
                await asyncio.wait(calls)
            await self.retire_workers(session)
            held = self.dirs_held(session.id) if self.dirs_held is not None else None
            if held is not None:
                await held
            await asyncio.get_running_loop().run_in_executor(None, session.remove_dirs)
            self._release(session)  # no call of it runs, nothing of it is left

        task = asyncio.get_running_loop().create_task(remove())
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def retire_workers(self, session: SessionState) -> None:
        """End the worker ``session`` keeps, before its directories go or are wiped for
        another request: nothing of it may outlive it."""
        if self.end_workers is not None:
            await self.end_workers(session.id)

    async def wait_ended(self, timeout: float) -> None:
        """Until every ended session's directories are gone (or ``timeout``)."""
        if self._ending:
            await asyncio.wait(list(self._ending), timeout=timeout)

    def _release(self, session: SessionState) -> None:
        """What the session held of the engine's: its uid, its place under the bound."""
        if self.uids is not None:
            for uid in (session.uid, session.family_uid):
                if uid is not None:
                    self.uids.give_back(uid)
        self.bound.release(session.quota_mb)
        self.live.pop(session.id, None)
