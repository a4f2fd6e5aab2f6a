"""``ResidentWorkers``: the workers that sessions keep for their stateful tools (those a plugin
lists in ``ToolPlugin.resident_tools``, such as ``python_session``), one per session.

A session's first call of such a tool starts its worker (``WorkerPool.run_resident``: forked and
hardened as every worker, under the session's uid and in its workspace); its next calls run in
that same process, one at a time, so what the tool kept is there. The worker ends with its
session (or when a stateless session is given back to be wiped), when it has been idle for
``idle_s``, when it has lived ``lifetime_s`` (neither for a lasting session's: an E2B sandbox's
interpreter lives as long as the sandbox), and when a call ends it (its deadline passed and
the interrupt did not help, it crashed, it broke a rule). The next call then starts a new one,
and is told, in a ``status`` event, that nothing was kept and why. A new one starts while the
sandbox's memory bound has room for it (``room``: below its high-water mark, or its tenant
below its fair share) and, where a count is set or nothing measures memory, while fewer than
``limit`` live: past either, a new session's call is turned away with ``overloaded``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import psutil

from a2e.caps.tools._reasons import FailureReason
from a2e_engine.engine._config import UNMEASURED_LIMIT, ResidentLimits
from a2e_engine.sandbox._busy import pid_of
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._messages import Job
from a2e_engine.sandbox._pool import ForkFailed, WorkerPool
from a2e_engine.sandbox._resident import Family, ResidentWorker
from a2e_engine.sandbox._run import EventSink, Outcome
from a2e_engine.sandbox._waiting import StopSignal

__all__ = ["ResidentWorkers"]

log = logging.getLogger("a2e.engine")

#: The directory of a session's temporary one that its kept worker has (``engine._calls``).
RESIDENT_TMP = "resident"
#: How often idle and old workers are looked for.
_REAP_EVERY_S = 1.0
#: How many may live at once where the memory bound alone admits them (a session uid each).
_MOST = 1 << 16
#: Whether the memory bound has room for one more of a tenant's: None, or why not.
Room = Callable[[str], str | None]


@dataclass
class _Kept:
    """One session's place: its worker while it has one, and why the last one ended."""

    lock: asyncio.Lock
    worker: ResidentWorker | None = None
    started: float = 0.0
    last_used: float = 0.0
    ended: str = ""  # why the last worker ended, until a call has been told
    lasting: bool = False  # its session's life bounds it, not idleness nor age
    job: Job | None = None  # the last one it ran: what a fork's turn takes its layers from


class ResidentWorkers:
    def __init__(self, pool: WorkerPool, limits: ResidentLimits) -> None:
        self.pool = pool
        self.limits = limits
        #: The memory bound's say on one more, where it measures memory (``Engine`` sets it).
        self.room: Room | None = None
        self._kept: dict[str, _Kept] = {}
        #: The families whose first worker was a session's, by that session's id.
        self._families: dict[str, Family] = {}
        self._starting = 0  # workers being started, counted against the limit
        self._reaper: asyncio.Task[None] | None = None

    def kept_bytes(self, session_id: str) -> int:
        """What the worker ``session_id`` keeps holds in memory now (0: it has none)."""
        kept = self._kept.get(session_id)
        if kept is None or not _alive(kept.worker):
            return 0
        assert kept.worker is not None
        try:
            return int(psutil.Process(kept.worker.worker.pid).memory_info().rss)
        except psutil.Error:
            return 0

    def worker_pid(self, session_id: str) -> int | None:
        """The pid of the worker ``session_id`` keeps, as this process sees it, if it has one."""
        kept = self._kept.get(session_id)
        if kept is None or not _alive(kept.worker):
            return None
        assert kept.worker is not None
        handle = kept.worker.worker
        return pid_of(handle.pidfd) or handle.pid

    @property
    def live(self) -> int:
        return sum(1 for kept in self._kept.values() if _alive(kept.worker))

    async def run(
        self,
        session_id: str,
        job: Job,
        deadline: Deadline,
        on_event: EventSink,
        stop: StopSignal,
        lasting: bool = False,
    ) -> Outcome:
        """``job`` in the session's worker, started if it has none; ``lasting``: the
        session's own end ends it, not idleness or age (``Host.open_session``)."""
        kept = self._kept.setdefault(session_id, _Kept(asyncio.Lock(), lasting=lasting))
        loop = asyncio.get_running_loop()
        async with kept.lock:
            too_old = loop.time() - kept.started > self.limits.lifetime_s
            if _alive(kept.worker) and too_old and not kept.lasting:
                await self._end(kept, f"it lived past its {self.limits.lifetime_s:g} s")
            starting = not _alive(kept.worker)
            why_not = self._why_not(str(job.get("tenant") or "")) if starting else None
            if why_not is not None:
                return Outcome(FailureReason.OVERLOADED, error=why_not, retryable=False)
            self._starting += starting
            try:
                outcome = await self._run(kept, job, deadline, on_event, stop)
            finally:
                self._starting -= starting
        self._start_reaper()
        return outcome

    @property
    def limit(self) -> int:
        """How many may live at once, counted (the memory bound aside)."""
        if self.limits.limit:
            return self.limits.limit
        return _MOST if self.room is not None else UNMEASURED_LIMIT

    def _why_not(self, tenant: str) -> str | None:
        """Why a new one may not start now, or None."""
        if self.live + self._starting >= self.limit:
            return (
                f"all {self.limit} sessions that may keep a worker have one; end a session "
                "(or raise resident_workers) and try again"
            )
        why = self.room(tenant) if self.room is not None else None
        if why is not None:
            return f"no room for another session's worker: {why}"
        return None

    async def _run(
        self, kept: _Kept, job: Job, deadline: Deadline, on_event: EventSink, stop: StopSignal
    ) -> Outcome:
        """Under the session's lock: tell the call if an earlier worker ended, then run it."""
        loop = asyncio.get_running_loop()
        if kept.worker is not None and not kept.worker.alive:  # it ended between calls
            await self._end(kept, kept.worker.why_gone())
        if not _alive(kept.worker) and kept.ended:
            with contextlib.suppress(ValueError):
                on_event(
                    "status",
                    {
                        "message": f"the session's worker ended ({kept.ended}): this call "
                        "runs in a new one, and nothing of the earlier one is kept"
                    },
                )
            kept.ended = ""
        before = kept.worker
        kept.job = job
        kept.worker, outcome = await self.pool.run_resident(
            kept.worker if _alive(kept.worker) else None, job, deadline, on_event, stop
        )
        now = loop.time()
        if kept.worker is not before:
            kept.started = now
        kept.last_used = now
        if kept.worker is not None and not kept.worker.alive:
            await self._end(kept, kept.worker.why_gone())
        return outcome

    async def fork(
        self,
        session_id: str,
        copies: Sequence[tuple[str, str, int | None]],
        copy_files: Callable[[ResidentWorker | None], Awaitable[None]],
        deadline: Deadline,
        stop: StopSignal,
    ) -> bool:
        """Session ``session_id``'s worker copied into each of ``copies`` (a new session's id,
        its directory, mounted over the session's in its copy, and its uid), under the
        session's lock, once ``copy_files`` (given the worker, or None when it has none) has
        copied the directories; the session goes on in its worker, or in one more copy
        (``sandbox._forks``). True if there was a worker to copy; False if there was none (the
        copies start theirs afresh). ``ForkFailed`` saying why it could not be copied."""
        kept = self._kept.get(session_id)
        if kept is None:
            await copy_files(None)
            return False
        async with kept.lock:
            worker = kept.worker if _alive(kept.worker) else None
            await copy_files(worker)
            if worker is None or kept.job is None:
                return False
            if self.live + len(copies) > self.limit:
                raise ForkFailed(f"{len(copies)} more kept workers would pass the {self.limit}")
            inside = os.path.dirname(worker.paths[0])  # its session's directory, as it sees it
            binds = [[(own, inside)] for _, own, _ in copies]
            uids = [uid for _, _, uid in copies]
            tmp_dir = os.path.join(inside, "tmp", RESIDENT_TMP)
            made = await self.pool.fork_resident(
                worker, kept.job, binds, uids, tmp_dir, deadline, stop
            )
            now = asyncio.get_running_loop().time()
            kept.worker = made[-1]
            family = made[-1].family
            if family is not None and family.first is worker:
                self._families[session_id] = family
                family.gone.add_done_callback(lambda _: self._families.pop(session_id, None))
            for (copy_id, _, _), copied in zip(copies, made, strict=False):
                self._kept[copy_id] = _Kept(
                    asyncio.Lock(), copied, now, now, lasting=kept.lasting, job=kept.job
                )
        self._start_reaper()
        return True

    def dirs_held(self, session_id: str) -> asyncio.Future[None] | None:
        """What the directories of ``session_id`` must wait for before they go: the end of the
        family its worker began (each copy's own directory is mounted over them in its mount
        namespace, and removing them would take those mounts away), or None."""
        family = self._families.get(session_id)
        return family.gone if family is not None and not family.gone.done() else None

    async def end(self, session_id: str, why: str = "its session ended") -> None:
        """End the session's worker, if it has one, and forget the session."""
        kept = self._kept.pop(session_id, None)
        if kept is not None:
            async with kept.lock:
                await self._end(kept, why)

    async def close(self) -> None:
        """End every worker (the engine stops)."""
        if self._reaper is not None:
            self._reaper.cancel()
        for session_id in list(self._kept):
            await self.end(session_id, "the engine stopped")

    async def _end(self, kept: _Kept, why: str) -> None:
        if kept.worker is not None:
            worker, kept.worker = kept.worker, None
            await worker.end(why)
            kept.ended = why

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        """End the workers idle or alive too long, and reap those that died between calls,
        while any are left to watch."""
        loop = asyncio.get_running_loop()
        while any(kept.worker is not None for kept in self._kept.values()):
            await asyncio.sleep(_REAP_EVERY_S)
            now = loop.time()
            for kept in list(self._kept.values()):
                worker = kept.worker
                if worker is None or kept.lock.locked():
                    continue
                if not worker.alive:
                    why = worker.why_gone()
                elif kept.lasting:
                    continue
                elif now - kept.last_used > self.limits.idle_s:
                    why = f"it was idle for more than {self.limits.idle_s:g} s"
                elif now - kept.started > self.limits.lifetime_s:
                    why = f"it lived past its {self.limits.lifetime_s:g} s"
                else:
                    continue
                async with kept.lock:
                    await self._end(kept, why)
                log.info("a session's resident worker ended: %s", why)


def _alive(worker: ResidentWorker | None) -> bool:
    return worker is not None and worker.alive
