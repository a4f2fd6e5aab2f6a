"""``WorkerPool``: the supervisor's side of the sandbox (asyncio, one event loop).

It puts together what runs a job in a fresh worker, each part in a module of its own: the line
to the zygote and its restarts (``sandbox.zygote_link``), the supply of pre-forked workers
(``sandbox.supply``), the slots that bound the calls running at once (``sandbox.slots``),
driving one job through one worker (``sandbox.drive``), and what its run means
(``sandbox.outcome``). It never unpickles anything: zygote and workers speak JSON only.

The pool knows nothing of sessions or of the wire protocol; the engine gives it a ``Job``, its
``Deadline`` and an ``on_event`` callback and gets a ``WorkerOutcome`` back.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from a2e_engine.sandbox.deadline import Deadline
from a2e_engine.sandbox.drive import drive, report_deadline
from a2e_engine.sandbox.footprint import check_footprint
from a2e_engine.sandbox.messages import Job
from a2e_engine.sandbox.outcome import OutcomeStatus, WorkerOutcome, classify, not_started
from a2e_engine.sandbox.settings import ZygoteSettings
from a2e_engine.sandbox.slots import WorkerSlots
from a2e_engine.sandbox.stream import EventSink, OutputCaps, report_frames
from a2e_engine.sandbox.supply import WorkerSupply
from a2e_engine.sandbox.waiting import StopSignal
from a2e_engine.sandbox.zygote_link import SandboxUnavailable, ZygoteLink

__all__ = ["PoolConfig", "PoolStatus", "SandboxUnavailable", "StopSignal", "WorkerPool"]

log = logging.getLogger("a2e.sandbox")


@dataclass(frozen=True)
class PoolStatus:
    """What the pool is doing now, for readiness checks and metrics."""

    zygote_up: bool
    broken: str | None  # why the sandbox will not come back, once it will not
    zygote_restarts: int
    workers_waiting: int  # pre-forked, ready for a job
    calls_running: int  # holding a worker slot
    calls_queued: int  # waiting for a slot


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
        self._link = ZygoteLink(
            self.config.zygote.to_json(), plugins_blob, self, self.config.start_timeout
        )
        self._supply: WorkerSupply | None = None
        self._slots: WorkerSlots | None = None
        self.layers: dict[str, Any] = {}
        self.zygote_pid: int | None = None
        self.zygote_footprint: dict[str, Any] = {}  # footprint.measure(), checked

    @property
    def in_flight(self) -> int:
        return self._slots.in_flight if self._slots else 0

    def status(self) -> PoolStatus:
        """On the pool's loop."""
        slots, link = self._slots, self._link
        return PoolStatus(
            zygote_up=link.up,
            broken=link.broken,
            zygote_restarts=max(0, link.starts - 1),
            workers_waiting=len(self._supply.idle_pids()) if self._supply else 0,
            calls_running=slots.in_flight if slots else 0,
            calls_queued=slots.waiting if slots else 0,
        )

    def idle_worker_pids(self) -> set[int]:
        """Pre-forked workers waiting for a job (for tests that look for leftover processes)."""
        return self._supply.idle_pids() if self._supply else set()

    # -- lifecycle --

    async def start(self) -> None:
        config = self.config
        self._slots = WorkerSlots(config.max_workers)
        self._supply = WorkerSupply(
            config.profiles,
            config.prefork,
            config.max_workers,
            config.max_frame,
            spawn=self._link.spawn,
            broken=lambda: self._link.broken,
            loop=asyncio.get_running_loop(),
        )
        await self._link.start()

    async def stop(self) -> None:
        if self._supply is not None:
            # Every worker killed, and its call told at once that the zygote goes with it.
            self._supply.stopping = True
            self._supply.kill_all()
            self._supply.drop_all()
        await self._link.stop()

    # -- what the zygote says (sandbox.zygote_link.ZygoteListener) --

    def on_ready(self, hello: dict[str, Any]) -> None:
        # What the engine added (disk_quota) stays across restarts of the zygote.
        self.layers = {**self.layers, **report_deadline(), **report_frames(), **hello["layers"]}
        self.zygote_pid = hello["pid"]
        try:
            self.zygote_footprint = check_footprint(hello["footprint"])
        except ValueError as exc:
            log.warning("the zygote's footprint report is unreadable: %s", exc)
            self.zygote_footprint = {}
        assert self._supply is not None
        self._supply.ensure_all()

    def on_message(self, message: dict[str, Any], fds: list[int]) -> None:
        assert self._supply is not None
        self._supply.on_message(message, fds)

    def on_lost(self) -> None:
        assert self._supply is not None
        self._supply.kill_all()
        self._supply.drop_all()

    def on_broken(self, why: str) -> None:
        assert self._supply is not None
        self._supply.wake_all()

    # -- running a job --

    async def run(
        self, job: Job, deadline: Deadline, on_event: EventSink, stop: StopSignal | None = None
    ) -> WorkerOutcome:
        """Run ``job`` in a fresh worker, within ``deadline``."""
        assert self._slots is not None and self._supply is not None
        loop = asyncio.get_running_loop()
        stop = stop or StopSignal()
        queued_at = loop.time()
        profile = job["profile"]
        if profile not in self._supply.ready:
            return WorkerOutcome(
                OutcomeStatus.SETUP_FAILED, error=f"sandbox profile {profile!r} is not enabled"
            )
        if not await self._slots.acquire(deadline, stop):
            return self._not_started(stop, deadline, queued_at, "waiting for a free worker slot")
        try:
            try:
                worker = await self._supply.take(profile, deadline, stop)
            except SandboxUnavailable as exc:
                return WorkerOutcome(OutcomeStatus.UNAVAILABLE, error=str(exc))
            if worker is None:
                return self._not_started(
                    stop, deadline, queued_at, "waiting for a sandboxed worker"
                )
            queued_ms = int((loop.time() - queued_at) * 1000)
            run = await drive(worker, job, deadline, on_event, stop, self._caps)
            outcome = classify(run, deadline, self.config.zygote.limits.call_memory_mb)
            outcome.queued_ms = queued_ms
            return outcome
        finally:
            self._slots.release()

    def _not_started(
        self, stop: StopSignal, deadline: Deadline, queued_at: float, waiting: str
    ) -> WorkerOutcome:
        assert self._slots is not None and self._supply is not None
        queued_ms = int((asyncio.get_running_loop().time() - queued_at) * 1000)
        detail = f" ({self._slots.in_flight} calls running)"
        if self._supply.last_spawn_error:
            detail += f"; last fork error: {self._supply.last_spawn_error}"
        return not_started(stop, deadline, queued_ms, waiting, detail)
