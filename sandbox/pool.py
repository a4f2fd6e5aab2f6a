"""``WorkerPool``: the supervisor's side of the sandbox (asyncio, one event loop).

It owns one zygote, keeps ``prefork`` hardened workers per profile waiting for a job, hands each
job to exactly one fresh worker, reads that worker's frames as they arrive, enforces the
deadline and the output caps, kills the worker's whole tree when needed, and turns what happened
into a ``WorkerOutcome``. It never unpickles anything: zygote and workers speak JSON only.

The pool knows nothing of sessions or of the wire protocol; the engine gives it a ``Job`` and an
``on_event`` callback and gets an outcome back.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import json
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from a2e_engine.sandbox.cgroups import remove_cgroup_tree
from a2e_engine.sandbox.deadline import Deadline
from a2e_engine.sandbox.frames import FrameDecoder, encode_frame
from a2e_engine.sandbox.handle import WorkerHandle
from a2e_engine.sandbox.launch import join_or_kill, spawn_zygote
from a2e_engine.sandbox.messages import (
    Job,
    SetupError,
    check_control,
    check_worker_frame,
    control,
)
from a2e_engine.sandbox.outcome import OutcomeStatus, WorkerOutcome, describe_exit
from a2e_engine.sandbox.seccomp import PROFILES
from a2e_engine.sandbox.settings import ZygoteSettings
from a2e_engine.sandbox.stream import EventSink, OutputCaps, ResultReader
from a2e_engine.sandbox.waiting import StopSignal, race
from a2e_engine.sandbox.zygote import CONTROL_MAX

__all__ = ["PoolConfig", "SandboxUnavailable", "StopSignal", "WorkerPool"]

log = logging.getLogger("a2e.sandbox")

#: How long a worker that sent its result may take to exit before it is killed.
EXIT_GRACE_S = 5.0
#: How long a worker that closed its pipe without a result may take to exit (it is probably
#: dying already: os._exit, a signal) before it is killed as unresponsive.
NO_RESULT_GRACE_S = 0.5
#: How long to wait for the exit report after SIGKILL.
KILL_WAIT_S = 10.0


_ALWAYS: dict[str, Any] = {"active": True, "reason": ""}


class SandboxUnavailable(RuntimeError):
    """The zygote could not be started (or keeps dying)."""


@dataclass(frozen=True)
class PoolConfig:
    """The pool's own settings, and the zygote's (``sandbox.settings``)."""

    zygote: ZygoteSettings = field(default_factory=ZygoteSettings)
    max_workers: int = 4
    prefork: int = 2
    max_output_bytes: int = 64 * 1024 * 1024
    max_events: int = 10_000
    start_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.max_workers < 1 or self.prefork < 0:
            raise ValueError("max_workers must be >= 1 and prefork >= 0")

    @property
    def profiles(self) -> tuple[str, ...]:
        return self.zygote.profiles

    @property
    def max_frame(self) -> int:
        return self.zygote.max_frame


class WorkerPool:
    """Runs jobs in fresh sandboxed workers. Create, ``await start()``, ``run()``, ``stop()``."""

    def __init__(self, plugins_blob: bytes, config: PoolConfig | None = None) -> None:
        self.config = config or PoolConfig()
        self._caps = OutputCaps(
            self.config.max_frame, self.config.max_output_bytes, self.config.max_events
        )
        self._plugins_blob = plugins_blob
        self._loop: asyncio.AbstractEventLoop | None = None
        self._process: Any = None
        self._sock: socket.socket | None = None
        self._zygote_ready: asyncio.Future[dict[str, Any]] | None = None
        self._workers: dict[int, WorkerHandle] = {}
        self._ready: dict[str, collections.deque[WorkerHandle]] = {
            p: collections.deque() for p in self.config.profiles
        }
        self._spawning: dict[str, int] = dict.fromkeys(self.config.profiles, 0)
        self._waiters: dict[str, collections.deque[asyncio.Future[None]]] = {
            p: collections.deque() for p in self.config.profiles
        }
        self._slots: asyncio.Semaphore | None = None
        self._restarts: list[float] = []
        self._restart_task: asyncio.Task[None] | None = None
        self._cgroups: list[str] = []  # one per zygote started; removed at stop
        self._broken: str | None = None
        self._stopping = False
        self._last_spawn_error = ""
        self.layers: dict[str, Any] = {}
        self.zygote_pid: int | None = None
        self.in_flight = 0

    def idle_worker_pids(self) -> set[int]:
        """Pre-forked workers waiting for a job (for tests that look for leftover processes)."""
        return {handle.pid for ready in self._ready.values() for handle in ready}

    # -- lifecycle --

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(self.config.max_workers)
        await self._start_zygote()

    async def _start_zygote(self) -> None:
        assert self._loop is not None
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        process = spawn_zygote(child, self.config.zygote.to_json(), self._plugins_blob)
        child.close()
        parent.setblocking(False)
        self._process, self._sock = process, parent
        self._zygote_ready = self._loop.create_future()
        self._loop.add_reader(parent.fileno(), self._on_control, parent)
        try:
            hello = await asyncio.wait_for(self._zygote_ready, self.config.start_timeout)
        except (TimeoutError, SandboxUnavailable):
            self._drop_zygote()
            await asyncio.get_running_loop().run_in_executor(None, join_or_kill, process, 0.0)
            raise
        # The supervisor's own part: every call has a deadline, every frame is checked.
        self.layers = {"deadline": _ALWAYS, "frames": _ALWAYS, **hello["layers"]}
        self.zygote_pid = hello["pid"]
        for layer in ("pids_cgroup", "memory_cgroup"):
            cgroup = self.layers.get(layer, {})
            if cgroup.get("active"):
                self._cgroups.append(cgroup["path"])
        for profile in self.config.profiles:
            self._ensure_supply(profile)

    async def stop(self) -> None:
        self._stopping = True
        for worker in list(self._workers.values()):
            worker.kill()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.send(control("stop"))
        process = self._process
        self._drop_zygote()
        if process is not None:
            await asyncio.get_running_loop().run_in_executor(None, join_or_kill, process)
        for path in self._cgroups:
            remove_cgroup_tree(path)

    def _drop_zygote(self) -> None:
        if self._sock is not None and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
        self._sock = None
        for worker in list(self._workers.values()):
            if not worker.exited.done():
                worker.exited.set_result({"zygote_died": True})
            if not worker.busy:
                worker.close()
        self._workers.clear()
        for queue in self._ready.values():
            queue.clear()
        self._spawning = dict.fromkeys(self.config.profiles, 0)

    # -- control channel --

    def _on_control(self, sock: socket.socket) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, CONTROL_MAX, 4)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b"", []
            if not data:
                for fd in fds:
                    os.close(fd)
                self._on_zygote_lost("its control socket closed")
                return
            for fd in fds:
                os.set_inheritable(fd, False)
            try:
                message = check_control(json.loads(data))
            except ValueError as exc:  # MalformedMessage, or not JSON at all
                log.error("the zygote sent a malformed control message: %s", exc)
                message = None
            if message is None:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                continue
            try:
                self._on_message(message, fds)
            except Exception:
                log.exception("handling a control message from the zygote failed")
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _on_message(self, message: dict[str, Any], fds: list[int]) -> None:
        """A checked control message (``sandbox.messages``) and the fds it carried."""
        op = message["op"]
        if op == "ready" and self._zygote_ready and not self._zygote_ready.done():
            self._zygote_ready.set_result(message)
        elif op == "fatal":
            error = SandboxUnavailable(f"the sandbox zygote failed to start: {message['error']}")
            log.error("%s\n%s", error, message["traceback"])
            if self._zygote_ready and not self._zygote_ready.done():
                self._zygote_ready.set_exception(error)
        elif op == "worker":
            assert self._loop is not None
            if len(fds) != 3 or message["profile"] not in self._ready:
                raise ValueError(f"a worker message with {len(fds)} fds for {message['profile']}")
            worker = WorkerHandle(message["pid"], message["profile"], fds, self._loop)
            self._workers[worker.pid] = worker
            self._spawning[worker.profile] = max(0, self._spawning[worker.profile] - 1)
            self._ready[worker.profile].append(worker)
            self._wake(worker.profile)
        elif op == "exit":
            exited = self._workers.pop(message["pid"], None)
            if exited is None:
                return
            exited.exited.set_result(message)
            if not exited.busy:
                self._discard_idle(exited)
        elif op == "spawn_failed":
            profile = message["profile"]
            if profile not in self._spawning:
                return
            self._spawning[profile] = max(0, self._spawning[profile] - 1)
            self._last_spawn_error = message["error"]
            log.warning("the zygote could not fork a worker: %s", self._last_spawn_error)
            assert self._loop is not None
            self._loop.call_later(0.05, self._ensure_supply, profile)

    def _discard_idle(self, worker: WorkerHandle) -> None:
        """A waiting worker died before it got a job: log why, replace it."""
        with contextlib.suppress(ValueError):
            self._ready[worker.profile].remove(worker)
        reason = ""
        with contextlib.suppress(Exception):
            decoder = FrameDecoder(self.config.max_frame)
            frames = decoder.feed(os.read(worker.result_fd, self.config.max_frame))
            said = [check_worker_frame(frame) for frame in frames]
            reason = next((s.error for s in said if isinstance(s, SetupError)), "")
        worker.close()
        if self._stopping:
            return
        self._last_spawn_error = reason or "a waiting worker died before its job"
        log.warning("idle worker %d died: %s", worker.pid, self._last_spawn_error)
        assert self._loop is not None
        self._loop.call_later(0.05, self._ensure_supply, worker.profile)

    def _on_zygote_lost(self, why: str) -> None:
        if self._stopping:
            return
        if self._zygote_ready is not None and not self._zygote_ready.done():
            # It died while starting: the restart loop waiting for it sees this and retries.
            self._zygote_ready.set_exception(SandboxUnavailable(f"the new zygote died: {why}"))
            return
        log.error("the sandbox zygote died (%s); calls in flight fail, restarting it", why)
        for worker in self._workers.values():
            worker.kill()
        self._drop_zygote()
        if self._restart_task is None or self._restart_task.done():
            assert self._loop is not None
            self._restart_task = self._loop.create_task(self._restart_zygote(why))

    async def _restart_zygote(self, why: str) -> None:
        """One restart loop at a time; more than five deaths a minute marks the pool broken."""
        while not self._stopping:
            now = time.monotonic()
            self._restarts = [t for t in self._restarts if now - t < 60] + [now]
            if len(self._restarts) > 5:
                self._broken = (
                    f"the sandbox zygote died {len(self._restarts)} times within a minute ({why})"
                )
                for waiters in self._waiters.values():
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_result(None)
                return
            try:
                await self._start_zygote()
                return
            except Exception as exc:
                why = f"restart failed: {exc}"
                log.error("%s", why)
                await asyncio.sleep(0.5)

    # -- supply of ready workers --

    def _ensure_supply(self, profile: str) -> None:
        if self._sock is None or self._stopping:
            return
        wanted = self.config.prefork + len(self._waiters[profile])
        have = len(self._ready[profile]) + self._spawning[profile]
        cap = self.config.max_workers + self.config.prefork
        count = min(wanted - have, cap - self._spawning[profile])
        if count <= 0:
            return
        self._spawning[profile] += count
        try:
            self._sock.send(control("spawn", profile=profile, count=count))
        except OSError as exc:
            self._spawning[profile] -= count
            self._on_zygote_lost(f"sending to it failed: {exc}")

    def _wake(self, profile: str) -> None:
        waiters = self._waiters[profile]
        while waiters and self._ready[profile]:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    async def _take_worker(
        self, profile: str, deadline: Deadline, stop: StopSignal
    ) -> WorkerHandle | None:
        assert self._loop is not None
        while True:
            if self._broken:
                raise SandboxUnavailable(self._broken)
            ready = self._ready[profile]
            while ready:
                worker = ready.popleft()
                if not worker.exited.done():
                    worker.busy = True
                    # Not now: the zygote woken by this request tends to take our CPU (the
                    # scheduler favours a wakee) for the ~2 ms of a fork, with the job still
                    # unsent. Queued, it goes out once the job is written and we wait.
                    self._loop.call_soon(self._ensure_supply, profile)
                    return worker
                worker.close()
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._waiters[profile].append(waiter)
            self._ensure_supply(profile)
            try:
                if not await race(deadline.at, waiter, stop=stop):
                    return None
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters[profile].remove(waiter)

    # -- running a job --

    async def run(
        self, job: Job, deadline: Deadline, on_event: EventSink, stop: StopSignal | None = None
    ) -> WorkerOutcome:
        """Run ``job`` in a fresh worker, within ``deadline``."""
        loop = asyncio.get_running_loop()
        stop = stop or StopSignal()
        queued_at = loop.time()
        if job.profile not in self._ready:
            return WorkerOutcome(
                OutcomeStatus.SETUP_FAILED, error=f"sandbox profile {job.profile!r} is not enabled"
            )
        assert self._slots is not None
        if self._slots.locked() or stop.is_set():
            acquire = loop.create_task(self._slots.acquire())
            if not await race(deadline.at, acquire, stop=stop):
                acquire.cancel()
                if acquire.done() and not acquire.cancelled():
                    self._slots.release()
                return self._not_started(
                    stop, deadline, queued_at, "waiting for a free worker slot"
                )
        else:
            await self._slots.acquire()  # free: returns at once
        self.in_flight += 1
        try:
            try:
                worker = await self._take_worker(job.profile, deadline, stop)
            except SandboxUnavailable as exc:
                return WorkerOutcome(OutcomeStatus.UNAVAILABLE, error=str(exc))
            if worker is None:
                return self._not_started(
                    stop, deadline, queued_at, "waiting for a sandboxed worker"
                )
            queued_ms = int((loop.time() - queued_at) * 1000)
            outcome = await self._drive(worker, job, deadline, on_event, stop)
            outcome.queued_ms = queued_ms
            return outcome
        finally:
            self.in_flight -= 1
            self._slots.release()

    def _not_started(
        self, stop: StopSignal, deadline: Deadline, queued_at: float, what: str
    ) -> WorkerOutcome:
        assert self._loop is not None
        if stop.is_set():
            return WorkerOutcome(
                OutcomeStatus.CANCELLED, error=f"cancelled before the tool started ({what})"
            )
        detail = f"; last fork error: {self._last_spawn_error}" if self._last_spawn_error else ""
        return WorkerOutcome(
            OutcomeStatus.TIMEOUT,
            queued_ms=int((self._loop.time() - queued_at) * 1000),
            error=deadline.timed_out(f" while {what} ({self.in_flight} calls running){detail}"),
        )

    async def _drive(
        self,
        worker: WorkerHandle,
        job: Job,
        deadline: Deadline,
        on_event: EventSink,
        stop: StopSignal,
    ) -> WorkerOutcome:
        loop = asyncio.get_running_loop()
        started = loop.time()
        reader = ResultReader(worker, self._caps, on_event, loop)
        ended_by: OutcomeStatus | None = None
        exit_awaited = True
        try:
            await self._send_job(worker, job, deadline, stop)
            if not await race(deadline.at, reader.finished, worker.exited, stop=stop):
                ended_by = OutcomeStatus.CANCELLED if stop.is_set() else OutcomeStatus.TIMEOUT
                if job.cancel_grace_s > 0:
                    # The tool asked to hear about it: it may cancel work it started elsewhere.
                    worker.send_signal(signal.SIGTERM)
                    await race(loop.time() + job.cancel_grace_s, worker.exited)
            if ended_by is not None or reader.violation is not None:
                worker.kill()
            elif reader.result is not None and not PROFILES[worker.profile].allow_processes:
                # A worker that cannot fork has nothing that could outlive it: kill it now
                # (no user code runs after SIGKILL is queued) and let it exit off our path.
                worker.kill()
                exit_awaited = False
            else:
                # It finished its stream; it should be exiting. Give it a moment (within the
                # call's own budget) to report how it ended, then make sure it is gone.
                grace = loop.time() + (EXIT_GRACE_S if reader.result else NO_RESULT_GRACE_S)
                if not await race(min(deadline.at, grace), worker.exited, stop=stop):
                    if reader.result is None:
                        reader.unresponsive = True
                    worker.kill()
            if exit_awaited:
                # After SIGKILL the exit report follows at once (or the zygote died: resolved).
                await race(loop.time() + KILL_WAIT_S, worker.exited)
            reader.drain()
        finally:
            reader.stop()
            worker.close()
        outcome = self._outcome(worker, reader, ended_by, deadline, exit_awaited)
        outcome.run_ms = int((loop.time() - started) * 1000)
        return outcome

    async def _send_job(
        self, worker: WorkerHandle, job: Job, deadline: Deadline, stop: StopSignal
    ) -> None:
        data = memoryview(encode_frame(job.to_frame()))
        loop = asyncio.get_running_loop()
        while data:
            try:
                written = os.write(worker.job_fd, data)
                data = data[written:]
            except BlockingIOError:
                writable: asyncio.Future[None] = loop.create_future()
                loop.add_writer(worker.job_fd, _resolve, writable)
                try:
                    if not await race(deadline.at, writable, worker.exited, stop=stop):
                        return  # the deadline or the cancel is handled by the caller
                finally:
                    loop.remove_writer(worker.job_fd)
                if worker.exited.done():
                    return
            except OSError as exc:
                if exc.errno != errno.EPIPE:
                    log.warning("writing a job to worker %d: %s", worker.pid, exc)
                return  # the worker is gone; its outcome will say why
        os.close(worker.job_fd)
        worker.job_fd = -1

    def _outcome(
        self,
        worker: WorkerHandle,
        reader: ResultReader,
        ended_by: OutcomeStatus | None,
        deadline: Deadline,
        exit_awaited: bool,
    ) -> WorkerOutcome:
        outcome = WorkerOutcome(OutcomeStatus.CRASHED, events_dropped=reader.dropped)
        result = reader.result
        sentence = ""
        if not exit_awaited and result is not None:
            # Exited off the path: its own account of itself is all there is (and it only
            # concerns itself).
            outcome.exit_code = 0
            outcome.cpu_ms = result.cpu_ms
            outcome.peak_rss_kb = result.maxrss_kb
            info: dict[str, Any] = {}
        else:
            info = worker.exited.result() if worker.exited.done() else {"zygote_died": True}
        if "status" in info:
            outcome.exit_code, outcome.signal, sentence = describe_exit(int(info["status"]))
            outcome.cpu_ms = int(info.get("cpu_ms", 0))
            outcome.peak_rss_kb = int(info.get("maxrss_kb", 0))
        if reader.violation is not None:
            outcome.status = OutcomeStatus.VIOLATION
            outcome.error = f"{reader.violation}; it was killed"
        # A result written during a cancel grace (the tool cleaning up) does not change why the
        # call ended.
        elif ended_by is OutcomeStatus.TIMEOUT:
            outcome.status = ended_by
            outcome.error = deadline.timed_out("; the worker and all its processes were killed")
        elif ended_by is OutcomeStatus.CANCELLED:
            outcome.status = ended_by
            outcome.error = "cancelled; the worker and all its processes were killed"
        elif result is not None:
            outcome.status = OutcomeStatus.OK if result.ok else OutcomeStatus.FAILED
            outcome.data = result.data
            outcome.error = result.error
            outcome.exc_type = result.exc_type
            outcome.retryable = result.retryable
            outcome.traceback = result.traceback
        elif reader.unresponsive:
            outcome.error = (
                "the worker closed its result pipe without sending a result and did not exit; "
                "it was killed"
            )
        elif reader.setup_error is not None:
            outcome.status = OutcomeStatus.SETUP_FAILED
            outcome.error = f"the sandbox could not be set up: {reader.setup_error}"
        elif info.get("oom"):
            limit = self.config.zygote.limits.call_memory_mb
            outcome.error = (
                f"out of memory: the call went past its {limit} MiB memory limit and the kernel "
                "killed it"
            )
        elif info.get("zygote_died"):
            outcome.error = "the sandbox zygote died during the call; the call was aborted"
        else:
            outcome.error = sentence
        return outcome


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
