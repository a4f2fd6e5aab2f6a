"""``WorkerSupply``: the pre-forked workers, ``prefork`` per profile kept waiting for a job.

It asks the zygote for workers (``spawn``), takes them in as the zygote reports them, hands each
to exactly one call (waiting, within the call's deadline, when none is ready), replaces the ones
taken or dead, and learns how each ended. A waiting worker that died is logged with its reason
and replaced.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from collections.abc import Callable

from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._frames import FrameDecoder
from a2e_engine.sandbox._messages import AboutWorkers, SetupError, check_worker_frame
from a2e_engine.sandbox._run import ZYGOTE_DIED, WorkerExit, WorkerHandle
from a2e_engine.sandbox._waiting import StopSignal, race
from a2e_engine.sandbox._zygote_control import SandboxUnavailable

__all__ = ["WorkerSupply"]

log = logging.getLogger("a2e.sandbox")

#: How long after a failed fork or a dead waiting worker the next is asked for.
RETRY_S = 0.05


class WorkerSupply:
    def __init__(
        self,
        profiles: tuple[str, ...],
        prefork: int,
        max_workers: int,
        max_frame: int,
        spawn: Callable[[str, int], bool],
        broken: Callable[[], str | None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.prefork = prefork
        self.max_workers = max_workers
        self.max_frame = max_frame
        self._spawn = spawn  # asks the zygote; False if there is none to ask
        self._broken = broken
        self._loop = loop
        self.workers: dict[int, WorkerHandle] = {}  # every worker alive, by pid
        self.ready: dict[str, collections.deque[WorkerHandle]] = {
            p: collections.deque() for p in profiles
        }
        self.spawning: dict[str, int] = dict.fromkeys(profiles, 0)
        self.waiters: dict[str, collections.deque[asyncio.Future[None]]] = {
            p: collections.deque() for p in profiles
        }
        self.last_spawn_error = ""
        self.stopping = False

    def idle_pids(self) -> set[int]:
        return {handle.pid for ready in self.ready.values() for handle in ready}

    # -- asking for workers --

    def ensure(self, profile: str) -> None:
        """Ask for what ``profile`` lacks: ``prefork`` waiting, plus one per waiting call."""
        if self.stopping:
            return
        wanted = self.prefork + len(self.waiters[profile])
        have = len(self.ready[profile]) + self.spawning[profile]
        cap = self.max_workers + self.prefork
        count = min(wanted - have, cap - self.spawning[profile])
        if count <= 0:
            return
        self.spawning[profile] += count
        if not self._spawn(profile, count):  # no zygote (it may just have died: drop_all)
            self.spawning[profile] = max(0, self.spawning[profile] - count)

    def ensure_all(self) -> None:
        for profile in self.ready:
            self.ensure(profile)

    # -- what the zygote reports --

    def on_message(self, message: AboutWorkers, fds: list[int]) -> None:
        """A checked control message (``sandbox._messages``); the fds are ours to keep or close."""
        if message["op"] == "worker":
            profile = message["profile"]
            if self.stopping or len(fds) != 3 or profile not in self.ready:
                for fd in fds:
                    os.close(fd)
                if profile in self.spawning:
                    self.spawning[profile] = max(0, self.spawning[profile] - 1)
                if not self.stopping:
                    log.error("the zygote reported a worker with %d fds for %s", len(fds), profile)
                return
            worker = WorkerHandle(message["pid"], message["profile"], fds, self._loop)
            self.workers[worker.pid] = worker
            self.spawning[worker.profile] = max(0, self.spawning[worker.profile] - 1)
            self.ready[worker.profile].append(worker)
            self._wake(worker.profile)
        elif message["op"] == "exit":
            exited = self.workers.pop(message["pid"], None)
            if exited is None:
                return
            exited.exited.set_result(WorkerExit.reported(message))
            if not exited.busy:
                self._discard_idle(exited)
        else:
            profile = message["profile"]
            if profile not in self.spawning:
                return
            self.spawning[profile] = max(0, self.spawning[profile] - 1)
            self.last_spawn_error = message["error"]
            log.warning("the zygote could not fork a worker: %s", self.last_spawn_error)
            self._loop.call_later(RETRY_S, self.ensure, profile)

    def _discard_idle(self, worker: WorkerHandle) -> None:
        """A waiting worker died before it got a job: log why, replace it."""
        with contextlib.suppress(ValueError):
            self.ready[worker.profile].remove(worker)
        reason = ""
        with contextlib.suppress(Exception):
            decoder = FrameDecoder(self.max_frame)
            frames = decoder.feed(os.read(worker.result_fd, self.max_frame))
            said = [check_worker_frame(frame) for frame in frames]
            reason = next((s.error for s in said if isinstance(s, SetupError)), "")
        worker.close()
        if self.stopping:
            return
        self.last_spawn_error = reason or "a waiting worker died before its job"
        log.warning("idle worker %d died: %s", worker.pid, self.last_spawn_error)
        self._loop.call_later(RETRY_S, self.ensure, worker.profile)

    def kill_all(self) -> None:
        for worker in list(self.workers.values()):
            worker.kill()

    def drop_all(self) -> None:
        """The zygote is gone, and every worker with it: their exits are known."""
        for worker in list(self.workers.values()):
            if not worker.exited.done():
                worker.exited.set_result(ZYGOTE_DIED)
            if not worker.busy:
                worker.close()
        self.workers.clear()
        for queue in self.ready.values():
            queue.clear()
        self.spawning = dict.fromkeys(self.ready, 0)

    def wake_all(self) -> None:
        """No worker will come (the sandbox is broken): every waiting call finds out."""
        for waiters in self.waiters.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    # -- handing workers out --

    def _wake(self, profile: str) -> None:
        waiters = self.waiters[profile]
        while waiters and self.ready[profile]:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    async def take(self, profile: str, deadline: Deadline, stop: StopSignal) -> WorkerHandle | None:
        """A fresh worker of ``profile``, all the call's own; ``None`` if the deadline or the
        stop came first; ``SandboxUnavailable`` if none will ever come."""
        while True:
            broken = self._broken()
            if broken:
                raise SandboxUnavailable(broken)
            ready = self.ready[profile]
            while ready:
                worker = ready.popleft()
                if not worker.exited.done():
                    worker.busy = True
                    # Not now: the zygote woken by this request tends to take our CPU (the
                    # scheduler favours a wakee) for the length of a fork, with the job still
                    # unsent. Queued, it goes out once the job is written and we wait.
                    self._loop.call_soon(self.ensure, profile)
                    return worker
                worker.close()
            waiter: asyncio.Future[None] = self._loop.create_future()
            self.waiters[profile].append(waiter)
            self.ensure(profile)
            try:
                if not await race(deadline.at, waiter, stop=stop):
                    return None
            finally:
                with contextlib.suppress(ValueError):
                    self.waiters[profile].remove(waiter)
