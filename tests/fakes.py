"""A sandbox without processes, for tests of what lies above it.

``ThreadZygote`` stands where ``sandbox._zygote_control.ZygoteControl`` stands (the supervisor's line
to a zygote process; httpx's ``MockTransport`` stands where its transport does): it "forks"
each worker as a thread of the test process. Everything else is the engine's own: the
connection, the session, the call, the pool's slots and supply, the job frame written to a
real pipe, the worker's framing of events and result (``sandbox._worker.execute_job``), the
supervisor's reading of them with every cap (``sandbox._run``), the outcome and the result.
What it skips is what only processes show: the isolation layers (reported off, and why), a
kill at the deadline (a timed-out thread runs on: give these engines well-behaved tools), a
worker's crash or exit status. ``FakeEngine`` is an ``Engine`` on it, started in
milliseconds.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import os
import threading
from collections.abc import Sequence
from typing import Any

import dill

from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.sandbox._messages import Exited, Forked, Ready, read_job
from a2e_engine.sandbox._pool import WorkerPool
from a2e_engine.sandbox._run import report_layers
from a2e_engine.sandbox._settings import ZygoteSettings
from a2e_engine.sandbox._worker import execute_job, serve_later_jobs
from a2e_engine.sandbox._zygote_control import SandboxUnavailable, ZygoteListener
from a2e_engine.sandbox.layers import CATALOG, LayerReport

__all__ = ["FakeEngine", "ThreadZygote"]

WHY_OFF = "a fake sandbox (tests/fakes.py): jobs run in threads of the test process"
#: Far above any real pid, so that no test mistakes a thread for a process.
FIRST_PID = 1 << 30


class ThreadZygote:
    """``ZygoteControl``'s surface (start, stop, up, spawn, broken, starts, called)."""

    def __init__(
        self,
        settings_json: str,
        plugins_blob: bytes,
        listener: ZygoteListener,
        start_timeout: float = 60.0,
        name: str = "",
    ) -> None:
        self.called = f"the fake zygote of {name}" if name else "the fake zygote"
        self._max_frame = ZygoteSettings.from_json(settings_json).max_frame
        self._plugins: list[Any] = dill.loads(plugins_blob)  # our own engine's, in this test
        self._listener = listener
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pids = itertools.count(FIRST_PID)
        self._stopping = False
        self.broken: str | None = None
        self.starts = 0

    async def start(self) -> Ready:
        self._loop = asyncio.get_running_loop()
        own = report_layers()
        layers: dict[str, LayerReport] = {
            name: {"active": False, "reason": WHY_OFF} for name in CATALOG if name not in own
        }
        footprint = {"rss_kib": 0, "private_kib": 0, "mapped_kib": 0, "modules": 0, "packages": []}
        hello: Ready = {"op": "ready", "layers": layers, "pid": os.getpid(), "footprint": footprint}
        refused = self._listener.refusal(hello)
        if refused is not None:
            raise SandboxUnavailable(f"{self.called} may not serve: {refused}")
        self.starts += 1
        self._listener.on_ready(hello)
        return hello

    async def stop(self) -> None:
        self._stopping = True

    @property
    def up(self) -> bool:
        return self.starts > 0 and not self._stopping

    def spawn(self, profile: str, count: int) -> bool:
        if not self.up:
            return False
        for _ in range(count):
            self._fork(profile)
        return True

    def narrow(self, pid: int, keep: str) -> None:
        """Its workers are threads of this process: no mount namespace of their own."""

    async def adopt(
        self,
        pid: int,
        copies: list[dict[str, int]],
        binds: list[list[list[str]]],
        uids: list[int | None],
    ) -> tuple[list[tuple[int, list[int]]], asyncio.Future[None]]:
        """Threads cannot be forked."""
        raise ValueError("a worker that is a thread has no copies")

    def _fork(self, profile: str) -> None:
        """A worker: the real pipes, and a stand-in for its pidfd that no signal reaches."""
        job_r, job_w = os.pipe2(os.O_CLOEXEC)
        result_r, result_w = os.pipe2(os.O_CLOEXEC)
        not_a_pidfd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        pid = next(self._pids)
        threading.Thread(
            target=self._work, args=(pid, job_r, result_w), name=f"fake worker {pid}", daemon=True
        ).start()
        message: Forked = {"op": "worker", "pid": pid, "profile": profile}
        self._listener.on_message(message, [job_w, result_r, not_a_pidfd])

    def _work(self, pid: int, job_fd: int, result_fd: int) -> None:
        """``sandbox._worker.run_worker`` without its layers or its process."""
        try:
            try:
                job = read_job(job_fd, self._max_frame)
            except (EOFError, OSError):
                return  # never used: the supply discarded it
            plugins = list(self._plugins)
            index = job["plugin"]
            plugins[index] = copy.copy(plugins[index])  # a context and an event sink of its own
            execute_job(plugins[index], job, result_fd, self._max_frame)
            if job.get("resident"):
                serve_later_jobs(plugins, job, job_fd, result_fd, self._max_frame)
        except OSError:
            pass  # the supervisor closed its ends (a deadline, a cancel): nobody reads
        finally:
            for fd in (job_fd, result_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._exited(pid)

    def _exited(self, pid: int) -> None:
        message: Exited = {
            "op": "exit",
            "pid": pid,
            "status": 0,
            "cpu_ms": 0,
            "maxrss_kb": 0,
            "oom": False,
        }
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._listener.on_message, message, [])
            except RuntimeError:
                pass  # the engine's loop has stopped


class FakePool(WorkerPool):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs, control=ThreadZygote)


class FakeEngine(Engine):
    """An ``Engine`` whose workers are threads (``ThreadZygote``). Its layers are all off, so
    it must be allowed to run as root without them."""

    worker_pool = FakePool

    def __init__(
        self, plugins: Sequence[ToolPlugin] = (), config: EngineConfig | None = None, **kw: Any
    ) -> None:
        config = dataclasses.replace(config or EngineConfig(), allow_unprotected_root=True)
        super().__init__(plugins, config, **kw)
