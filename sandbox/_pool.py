"""``WorkerPool``: the supervisor's side of the sandbox (asyncio, one event loop).

It puts together what runs a job in a fresh worker, each part in a module of its own: a zygote
per plugin (or per group of plugins that share one), each with its supply of pre-forked
workers (``sandbox._plugin_zygote``), the line to each zygote and its restarts
(``sandbox._zygote_control``), the slots that bound the calls running at once across all of them
(``sandbox._slots``), one job through one worker to its ``Outcome`` (``sandbox._run``), or the
jobs of one session through its kept worker (``sandbox._resident``). It never unpickles
anything: zygote and workers speak JSON only.

The pool knows nothing of sessions or of the wire protocol; the engine gives it a ``Job``, its
``Deadline`` and an ``on_event`` callback and gets an ``Outcome`` back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from a2e.caps.tools._reasons import FailureReason
from a2e_engine.sandbox._busy import computing, pid_of
from a2e_engine.sandbox._call_input import CallInput
from a2e_engine.sandbox._cgroups import memory_of_process
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._forks import checked_copies
from a2e_engine.sandbox._limits import OutputCaps
from a2e_engine.sandbox._messages import Job
from a2e_engine.sandbox._paths import strictly_under
from a2e_engine.sandbox._plugin_zygote import PluginZygote, ZygoteSpec
from a2e_engine.sandbox._resident import Family, ResidentWorker
from a2e_engine.sandbox._run import (
    EventSink,
    Outcome,
    ShareSink,
    WorkerHandle,
    not_started,
    report_layers,
    run_job,
)
from a2e_engine.sandbox._settings import ZygoteSettings
from a2e_engine.sandbox._sharing import NO_CLAIM, Claim, SharedStore
from a2e_engine.sandbox._slots import LONG_RUN_S, WorkerSlots
from a2e_engine.sandbox._supply import WorkerSupply
from a2e_engine.sandbox._waiting import StopSignal, race
from a2e_engine.sandbox._zygote_control import ControlFactory, SandboxUnavailable, ZygoteControl
from a2e_engine.sandbox.layers import LayerReport, LayerReports, merge_reports

__all__ = [
    "ForkFailed",
    "PoolConfig",
    "PoolStatus",
    "SandboxUnavailable",
    "StopSignal",
    "WorkerPool",
    "ZygoteSpec",
    "check_workers",
]


@dataclass(frozen=True)
class PoolStatus:
    """What the pool is doing now, for readiness checks and metrics."""

    zygote_up: bool
    broken: str | None  # why the sandbox will not come back, once it will not
    zygote_restarts: int
    workers_waiting: int  # pre-forked, ready for a job
    calls_running: int  # holding a worker slot
    calls_queued: int  # waiting for a slot


def check_workers(max_workers: int | None, prefork: int) -> None:
    """How many workers may run calls at once (``None``: sized later) and wait ready for one."""
    if (max_workers is not None and max_workers < 1) or prefork < 0:
        raise ValueError("max_workers must be at least 1 and prefork at least 0")


@dataclass(frozen=True)
class PoolConfig:
    """The pool's own settings, and the zygote's (``sandbox._settings``): each zygote gets the
    frame size of ``output``, its workers' cap."""

    zygote: ZygoteSettings = field(default_factory=ZygoteSettings)
    max_workers: int = 4
    #: Calls that start at once whatever they do; past it, only while the running calls
    #: leave room (``sandbox._slots``). ``None``: ``max_workers``, every one of them.
    busy_workers: int | None = None
    prefork: int = 2
    output: OutputCaps = field(default_factory=OutputCaps)
    start_timeout: float = 60.0
    #: What calls share, by the plugin whose workers may offer to it (``sandbox._sharing``);
    #: its directories are that plugin's ``zygote.plugin_dirs``.
    stores: Mapping[str, SharedStore] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_workers(self.max_workers, self.prefork)


class WorkerPool:
    """Runs jobs in fresh sandboxed workers, each forked by the zygote of the job's plugin.
    Create, ``await start()``, ``run()``, ``stop()``."""

    def __init__(
        self,
        zygotes: Sequence[ZygoteSpec],
        config: PoolConfig | None = None,
        *,
        start_all: bool = False,
        accept: Callable[[LayerReports], str | None] | None = None,
        control: ControlFactory = ZygoteControl,
    ) -> None:
        """``accept`` says why a zygote that starts after ``start`` may not run its plugin's
        calls, given its layers (``None``: it may); those started by ``start`` are for the
        caller to judge from ``layers``. ``control`` makes the line to each zygote: the seam where
        tests put one without processes (tests/fakes.py), as httpx's ``MockTransport`` takes
        the place of its transport."""
        if not zygotes:
            raise ValueError("a pool needs at least one zygote")
        self.config = config or PoolConfig()
        self._caps = self.config.output
        self._accept = accept
        self._lines = {
            spec.name: PluginZygote(
                spec,
                self._settings_for(spec),
                self.config.prefork,
                self.config.max_workers,
                self._caps.max_frame,
                self.config.start_timeout,
                control,
            )
            for spec in zygotes
        }
        self._first = self._lines[zygotes[0].name]
        self._start_all = start_all
        self._slots: WorkerSlots | None = None
        #: The workers of the calls holding a slot: their pids as this process sees them
        #: (``sandbox._busy.pid_of``), when their run began and their session's workspace, by
        #: the pid their zygote reported.
        self._running: dict[int, tuple[int, float, str]] = {}
        #: Whether the sandbox's memory has room for a call beyond ``busy_workers`` (the
        #: engine's memory bound sets it; without one, there is none).
        self.memory_room: Callable[[], bool] = lambda: False
        #: The supervisor's own layers, beside the zygotes' (the caller may add its own).
        self.supervisor_layers: dict[str, LayerReport] = report_layers()

    def _settings_for(self, spec: ZygoteSpec) -> str:
        """The zygote settings of ``spec``: the seccomp profiles its own tools run under, so
        that it compiles no other filter and, without a network profile, can join the empty
        network namespace itself (``sandbox._network``); and the directories of its own plugin
        only (``ZygoteSettings.plugin_dirs``), where those of other plugins are hidden from
        its workers whole: their common parent, which names none of them. A plugin that
        shares its zygote (``ToolPlugin.zygote_group``) gets none: the other plugins' workers
        would share its mount namespace, where its directories cannot be hidden from them."""
        settings = self.config.zygote
        alone = len(spec.plugins) == 1
        own = {n: d for n, d in settings.plugin_dirs.items() if alone and n in spec.plugins}
        # Plugins given the same directories (the compile cache's) share them: not hidden.
        others = [
            d for n, d in settings.plugin_dirs.items() if n not in own and d not in own.values()
        ]
        hidden = tuple(dict.fromkeys(_home_of(dirs, settings.writable_paths) for dirs in others))
        settings = dataclasses.replace(
            settings,
            max_frame=self._caps.max_frame,
            plugin_dirs=own,
            hidden_paths=tuple(p for h in hidden for p in h),
        )
        if spec.profiles:
            settings = dataclasses.replace(settings, profiles=spec.profiles)
        return settings.to_json()

    @property
    def layers(self) -> LayerReports:
        """The isolation layers, as every zygote started so far reported them: a layer is
        on where it is on in all of them (``sandbox.layers.merge_reports``); each zygote's
        own report is in ``zygotes()``."""
        reports = {
            line.spec.name: line.hello["layers"]
            for line in self._lines.values()
            if line.started and isinstance(line.hello.get("layers"), dict)
        }
        if not reports:
            return LayerReports()
        return LayerReports({**merge_reports(reports), **self.supervisor_layers})

    @property
    def zygote_pid(self) -> int | None:
        """The first zygote's (the one started with the pool)."""
        return self._first.pid

    def zygote_pids(self) -> list[int]:
        """The zygotes running now (each plugin's starts on its first job)."""
        return [line.pid for line in self._lines.values() if line.started and line.pid]

    def zygotes(self) -> list[dict[str, Any]]:
        """Each zygote: its name, plugins, whether it runs, its pid and footprint."""
        return [
            {
                "name": line.spec.name,
                "plugins": list(line.spec.plugins),
                "started": line.started,
                "pid": line.pid if line.started else None,
                **(line.footprint if line.started else {}),
                "layers": line.hello.get("layers", {}) if line.started else {},
            }
            for line in self._lines.values()
        ]

    def status(self) -> PoolStatus:
        """On the pool's loop."""
        slots = self._slots
        started = [line for line in self._lines.values() if line.started]
        broken = next((line.control.broken for line in started if line.control.broken), None)
        return PoolStatus(
            zygote_up=bool(started) and all(line.control.up for line in started),
            broken=broken,
            zygote_restarts=sum(max(0, line.control.starts - 1) for line in started),
            workers_waiting=sum(len(line.idle_pids()) for line in started),
            calls_running=slots.in_flight if slots else 0,
            calls_queued=slots.waiting if slots else 0,
        )

    def idle_worker_pids(self) -> set[int]:
        """Pre-forked workers waiting for a job (for tests that look for leftover processes)."""
        return {pid for line in self._lines.values() for pid in line.idle_pids()}

    # -- lifecycle --

    async def start(self) -> None:
        """Start the first zygote (which reports the layers), or every one with
        ``start_all``; the others start on their first job."""
        self._slots = WorkerSlots(
            self.config.max_workers, self.config.busy_workers, room=self._room
        )
        await self._first.ensure_started()
        if self._start_all:
            await asyncio.gather(*(line.ensure_started() for line in self._lines.values()))
        for line in self._lines.values():
            line.accept = self._accept

    async def stop(self) -> None:
        await asyncio.gather(*(line.stop() for line in self._lines.values()))

    def _room(self) -> bool:
        """Whether a call may start beside ``busy_workers`` or more running ones: fewer than
        that many compute (``sandbox._busy``; a call that holds a slot and has no worker yet
        counts as computing, one that has run ``LONG_RUN_S`` counts only past ``busy_workers``
        such calls), and ``memory_room`` says the sandbox has room."""
        assert self._slots is not None
        busy, now = self._slots.busy, asyncio.get_running_loop().time()
        starting = self._slots.in_flight - len(self._running)
        short = [pid for pid, began, _ in self._running.values() if now - began < LONG_RUN_S]
        long = [pid for pid, began, _ in self._running.values() if now - began >= LONG_RUN_S]
        held = starting + computing(short) + max(0, computing(long) - busy)
        return held < busy and self.memory_room()

    def running_pids(self, workspace: str) -> list[int]:
        """The workers running calls for the session of ``workspace``, as this process sees
        their pids."""
        return [pid for pid, _, where in self._running.values() if where == workspace]

    def running_bytes(self, workspace: str) -> int:
        """What the jobs running for the session of ``workspace`` hold now: their workers'
        memory groups (everything they run, memfd and shmem pages too), or without those
        their workers' resident memory."""
        running = list(self._running.values())
        return sum(memory_of_process(pid) for pid, _, where in running if where == workspace)

    # -- running a job --

    async def run(
        self,
        job: Job,
        deadline: Deadline,
        on_event: EventSink,
        stop: StopSignal,
        given: CallInput | None = None,
    ) -> Outcome:
        """Run ``job`` in a fresh worker of its zygote, within ``deadline``; ``given``: its
        input after its start (``sandbox._call_input``)."""
        if given is not None:
            job = cast(Job, {**job, "input": True})
        _, outcome = await self._turn(None, False, job, deadline, on_event, stop, given)
        return outcome

    async def run_resident(
        self,
        resident: ResidentWorker | None,
        job: Job,
        deadline: Deadline,
        on_event: EventSink,
        stop: StopSignal,
    ) -> tuple[ResidentWorker | None, Outcome]:
        """Run ``job`` in ``resident``, the session's kept worker, or in a new one when it has
        none alive (``sandbox._resident``): the worker, alive or not, and the outcome."""
        return await self._turn(resident, True, job, deadline, on_event, stop)

    async def _turn(
        self,
        kept: ResidentWorker | None,
        keep: bool,
        job: Job,
        deadline: Deadline,
        on_event: EventSink,
        stop: StopSignal,
        given: CallInput | None = None,
    ) -> tuple[ResidentWorker | None, Outcome]:
        """One job's way through the pool: a supply of workers unless ``kept`` is alive; the
        store's word on it (``SharedStore.claim``: while another call makes what it would, it
        waits, holding nothing); a worker slot held while it runs (every job holds one), a
        fresh worker (kept for the session's next jobs when ``keep``), and the run, counted
        among the running while it lasts."""
        assert self._slots is not None
        loop = asyncio.get_running_loop()
        queued_at = loop.time()
        alive = kept if kept is not None and kept.alive else None
        supply = await self._supply_for(job) if alive is None else None
        if isinstance(supply, Outcome):
            return None, supply
        with contextlib.ExitStack() as held:  # the claim, then the slot, given back in turn
            claim = self._claim(job)
            for _ in range(2):  # a wait for what the call needs first, then for what it makes
                if claim.wait is None:
                    break
                if not await race(deadline.at, claim.wait, stop=stop):
                    waiting = "waiting for another call making the same (a compile)"
                    return kept, self._not_started(stop, deadline, queued_at, waiting)
                claim = self._claim(job) if claim.wait.result() else NO_CLAIM
            if claim.wait is None and claim.end is not None:
                held.callback(claim.end)
            tenant = job.get("tenant", "")
            if not await self._slots.acquire(deadline, stop, tenant):
                waiting = "waiting for a free worker slot"
                return kept, self._not_started(stop, deadline, queued_at, waiting)
            held.callback(self._slots.release, tenant)
            worker = alive.worker if alive is not None else None
            if supply is not None:
                taken = await self._take(supply, job, deadline, stop, queued_at)
                if isinstance(taken, Outcome):
                    return None, taken
                worker = taken
                if keep:
                    limits, paths = self.config.zygote.limits, (job["workspace"], job["tmp_dir"])
                    alive = ResidentWorker(taken, self._caps, limits, paths)
                    job = cast(Job, {**job, "resident": True})
            assert worker is not None
            queued_ms = int((loop.time() - queued_at) * 1000)
            seen_as = pid_of(worker.pidfd) or worker.pid
            self._running[worker.pid] = (seen_as, loop.time(), job["workspace"])
            try:
                if alive is not None:
                    outcome = await alive.run(job, deadline, on_event, stop)
                    if supply is not None and alive.alive:  # its first job: its own namespace
                        self._narrow(job, worker)
                else:
                    limits, shared = self.config.zygote.limits, self._share_sink(job)
                    outcome = await run_job(
                        worker, job, deadline, on_event, stop, self._caps, limits, shared, given
                    )
            finally:
                self._running.pop(worker.pid, None)
            outcome.queued_ms = queued_ms
            return alive, outcome

    async def fork_resident(
        self,
        resident: ResidentWorker,
        job: Job,
        binds: list[list[tuple[str, str]]],
        uids: list[int | None],
        tmp_dir: str,
        deadline: Deadline,
        stop: StopSignal,
    ) -> list[ResidentWorker]:
        """Copies of ``resident`` (``sandbox._forks``), one per list of ``binds`` (the copy's
        directories over the worker's) and per entry of ``uids`` (its session's uid;
        ``sandbox._adoption``), each a kept worker of its own; then the worker its session
        goes on in, last: ``resident`` itself where it could go on beside its copies (one
        thread), else one more copy, and ``resident`` runs no more (a family's first worker
        stays, stopped, while its copies live; a copy is ended). ``tmp_dir``: the temporary
        directory of the copies and of what goes on, as they see it; ``job``: the session's,
        whose layers the turn takes. ``ForkFailed`` saying why none was made."""
        line = self._lines.get(job["zygote"])
        if line is None or not resident.alive:
            raise ForkFailed("the sandbox's interpreter is not running")
        layers = resident.layers - (1 if resident.settling else 0) + 1  # its copies'
        if layers > MOST_DOMAINS:
            raise ForkFailed(
                f"this interpreter's copies would be kept apart {layers} times over, past the "
                f"{MOST_DOMAINS} Landlock allows: fork a sandbox that has run no cell since it "
                "was forked, a snapshot, or one nearer the first; or start a new one"
            )
        count = len(binds)
        bare = {"tool": "", "arguments": {}, "secrets": {}, "call_id": ""}
        turn = cast(Job, {**job, **bare, "copies": count, "tmp_dir": tmp_dir})
        outcome = await resident.run(turn, deadline, _no_events, stop)
        if not outcome.ok:
            raise ForkFailed(outcome.error or "the interpreter could not be forked")
        data = outcome.data if isinstance(outcome.data, dict) else {}
        goes_on = data.get("goes_on") is True
        if not goes_on:  # one more copy, which the session goes on in: its own directories
            binds, uids = [*binds, []], [*uids, resident.uid_inside]
        try:
            copies = checked_copies(data, len(binds))
        except ValueError as exc:
            await resident.end(f"it broke the rules of a fork: {exc}")
            raise ForkFailed(f"the interpreter broke the rules of a fork: {exc}") from None
        worker = resident.worker
        pairs = [[list(pair) for pair in per] for per in binds]
        try:
            adopted, placed = await line.control.adopt(worker.pid, list(copies), pairs, uids)
        except (ValueError, SandboxUnavailable) as exc:
            await resident.end(f"its copies could not be made apart: {exc}")
            raise ForkFailed(f"the copies could not be made apart: {exc}") from None
        loop = asyncio.get_running_loop()
        family = resident.family
        if family is None:
            family = resident.family = Family(resident)
        made = []
        for (pid, fds), uid in zip(adopted, uids, strict=True):
            handle = WorkerHandle(pid, worker.profile, fds, loop)
            handle.busy = True  # a kept worker's: never handed out
            line.adopt_worker(handle)
            paths = (resident.paths[0], tmp_dir)
            copy = ResidentWorker(
                handle, self._caps, resident.limits, paths, family, placed, layers, uid
            )
            made.append(copy)
        if goes_on:
            resident.layers, resident.settling = layers, True  # one more, at its next tool job
            resident.paths = (resident.paths[0], tmp_dir)
            return [*made, resident]
        await resident.end("it was forked: its copies go on")
        return made

    def _narrow(self, job: Job, worker: WorkerHandle) -> None:
        """A worker kept for a session, its first job done (it has its own mount namespace by
        then): its zygote has that namespace let go of every other session's mount
        (``sandbox._quota.narrow``), while it waits for its next job."""
        line = self._lines.get(job["zygote"])
        if line is not None:
            line.control.narrow(worker.pid, os.path.dirname(job["workspace"]))

    def _store_for(self, job: Job) -> SharedStore | None:
        """The store of the job's plugin, when it is the one plugin of its zygote
        (``plugin_dirs`` are given to such plugins only)."""
        line = self._lines.get(job["zygote"])
        plugins = line.spec.plugins if line is not None else ()
        store = self.config.stores.get(plugins[0]) if len(plugins) == 1 else None
        return store if store is not None and job["plugin"] == 0 else None

    def _claim(self, job: Job) -> Claim:
        """What the job's store says of it before it runs (``SharedStore.claim``)."""
        store = self._store_for(job)
        return store.claim(job["tool"], job["arguments"]) if store is not None else NO_CLAIM

    def _share_sink(self, job: Job) -> ShareSink | None:
        """Where the job's worker may offer what it made: the store of its plugin, given the
        job's arguments (``_store_for``); else nowhere."""
        store = self._store_for(job)
        if store is None:
            return None
        tool, arguments = job["tool"], job["arguments"]

        def offered(what: str, data: dict[str, Any]) -> None:
            store.offer(tool, arguments, what, data)

        return offered

    async def _supply_for(self, job: Job) -> WorkerSupply | Outcome:
        """The started supply of workers of the job's zygote that has its profile, or the
        outcome that says why there is none."""
        line = self._lines.get(job["zygote"])
        if line is None:
            return Outcome(
                FailureReason.SANDBOX_UNAVAILABLE, error=f"no sandbox zygote {job['zygote']!r}"
            )
        try:
            await line.ensure_started()
        except SandboxUnavailable as exc:
            return _unavailable(exc)
        supply = line.supply
        assert supply is not None
        if job["profile"] not in supply.ready:
            return Outcome(
                FailureReason.SANDBOX_UNAVAILABLE,
                error=f"sandbox profile {job['profile']!r} is not enabled",
            )
        return supply

    async def _take(
        self,
        supply: WorkerSupply,
        job: Job,
        deadline: Deadline,
        stop: StopSignal,
        queued_at: float,
    ) -> WorkerHandle | Outcome:
        """A fresh worker for ``job``, or the outcome that says why none came in time."""
        try:
            worker = await supply.take(job["profile"], deadline, stop)
        except SandboxUnavailable as exc:
            return _unavailable(exc)
        if worker is None:
            return self._not_started(
                stop, deadline, queued_at, "waiting for a sandboxed worker", supply
            )
        return worker

    def _not_started(
        self,
        stop: StopSignal,
        deadline: Deadline,
        queued_at: float,
        waiting: str,
        supply: WorkerSupply | None = None,
    ) -> Outcome:
        assert self._slots is not None
        queued_ms = int((asyncio.get_running_loop().time() - queued_at) * 1000)
        detail = f" ({self._slots.in_flight} calls running)"
        if supply is not None and supply.last_spawn_error:
            detail += f"; last fork error: {supply.last_spawn_error}"
        return not_started(stop, deadline, queued_ms, waiting, detail)


#: The Landlock domains a copy may enter beyond its worker's (``sandbox._forks``): a process
#: may be in 16 at most, its worker's one of them.
MOST_DOMAINS = 15


class ForkFailed(RuntimeError):
    """No copy of a kept worker could be made, and why."""


def _no_events(kind: str, data: dict[str, Any]) -> None:
    """A fork's turn says nothing but its result."""


def _home_of(dirs: tuple[str, ...], writable: tuple[str, ...]) -> tuple[str, ...]:
    """What to hide of a plugin's ``dirs``: their common parent when it lies beneath one of the
    writable paths (the state directory) without being it, else each of them."""
    if not dirs:
        return ()
    home = os.path.commonpath(dirs)
    inside = any(strictly_under(home, root) for root in writable)
    return (home,) if inside else tuple(dirs)


def _unavailable(exc: SandboxUnavailable) -> Outcome:
    """No worker can be had: the sandbox is broken, and another attempt would find it so."""
    return Outcome(FailureReason.SANDBOX_UNAVAILABLE, error=str(exc), retryable=False)
