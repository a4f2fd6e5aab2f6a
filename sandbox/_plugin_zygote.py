"""``PluginZygote``: one zygote of the pool, the plugins whose workers it forks, and their supply.

Each plugin (or group of plugins that declare they may share one) gets a zygote of its own,
holding that plugin alone and what it imported: a worker of one plugin cannot read another
plugin's objects or modules, and a plugin's crash or hang restarts its own zygote only. A line
starts its zygote on first use (``ensure_started``; once, however many calls ask at the same
moment), or with the pool when configured so, and keeps ``prefork`` workers waiting for each
profile its plugins' tools run under.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._footprint import check_footprint
from a2e_engine.sandbox._messages import AboutWorkers, Ready
from a2e_engine.sandbox._run import WorkerHandle
from a2e_engine.sandbox._supply import WorkerSupply
from a2e_engine.sandbox._zygote_control import ControlFactory, SandboxUnavailable, ZygoteControl
from a2e_engine.sandbox.layers import LayerReports

__all__ = ["PluginZygote", "ZygoteSpec"]

log = logging.getLogger("a2e.sandbox")

#: After a zygote failed to start, how long its calls fail at once before one tries again.
RETRY_START_S = 5.0


@dataclass(frozen=True)
class ZygoteSpec:
    """One zygote: a name (for reports), its plugins by value (a dill blob of their list; a
    job's ``plugin`` indexes it), and the profiles its plugins' tools run under."""

    name: str
    plugins_blob: bytes
    profiles: tuple[str, ...]
    plugins: tuple[str, ...] = ()  # their names, for reports


class PluginZygote:
    def __init__(
        self,
        spec: ZygoteSpec,
        settings_json: str,
        prefork: int,
        max_workers: int,
        max_frame: int,
        start_timeout: float,
        control: ControlFactory = ZygoteControl,
    ) -> None:
        self.spec = spec
        self._prefork, self._max_workers, self._max_frame = prefork, max_workers, max_frame
        self.control = control(settings_json, spec.plugins_blob, self, start_timeout, spec.name)
        self.supply: WorkerSupply | None = None
        self.started = False  # its zygote came up (restarts after a death are its control's)
        self._starting: asyncio.Task[None] | None = None  # the one start under way
        self._failure: SandboxUnavailable | None = None  # why the last start failed
        self._retry_at = 0.0  # and when the next call may try again
        self.hello: dict[str, Any] = {}  # its zygote's last ``ready`` message
        self.footprint: dict[str, Any] = {}
        #: Why its zygote's layers do not do for its calls (``None``: they do), asked at each
        #: start; a refused zygote is stopped and its start has failed with that reason.
        self.accept: Callable[[LayerReports], str | None] | None = None

    @property
    def pid(self) -> int | None:
        pid = self.hello.get("pid")
        return pid if isinstance(pid, int) else None

    async def ensure_started(self) -> None:
        """Start the zygote unless it is (being) started; ``SandboxUnavailable`` if it cannot.
        The start is the line's own task, so a caller that is cancelled while waiting does not
        cancel it for the others. After a failed start, calls fail at once with the same
        reason for ``RETRY_START_S``, and the next one after that tries again."""
        if self.started:
            return
        if self._starting is None:
            loop = asyncio.get_running_loop()
            if self._failure is not None and loop.time() < self._retry_at:
                raise self._failure
            self._starting = loop.create_task(self._start())
            # Retrieved even if every caller was cancelled while it ran.
            self._starting.add_done_callback(lambda t: t.cancelled() or t.exception())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self.supply = WorkerSupply(
            self.spec.profiles,
            self._prefork,
            self._max_workers,
            self._max_frame,
            spawn=self.control.spawn,
            broken=lambda: self.control.broken,
            loop=loop,
        )
        try:
            await self.control.start()
        except SandboxUnavailable as exc:
            failure = exc
        except TimeoutError:
            failure = SandboxUnavailable(f"{self.control.called} did not start")
        else:
            self._failure, self.started = None, True
            return
        finally:
            self._starting = None
        self._failure, self._retry_at = failure, loop.time() + RETRY_START_S
        raise failure

    async def stop(self) -> None:
        starting = self._starting
        if starting is not None:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, SandboxUnavailable):
                await starting
        if self.supply is not None:
            # Every worker killed, and its call told at once that the zygote goes with it.
            self.supply.stopping = True
            self.supply.kill_all()
            self.supply.drop_all()
        await self.control.stop()

    def idle_pids(self) -> set[int]:
        return self.supply.idle_pids() if self.supply else set()

    # -- what its zygote says (sandbox._zygote_control.ZygoteListener) --

    def refusal(self, hello: Ready) -> str | None:
        return self.accept(LayerReports(hello["layers"])) if self.accept is not None else None

    def on_ready(self, hello: Ready) -> None:
        self.hello = dict(hello)
        try:
            self.footprint = check_footprint(hello["footprint"])
        except ValueError as exc:
            log.warning("zygote %s: its footprint report is unreadable: %s", self.spec.name, exc)
            self.footprint = {}
        assert self.supply is not None
        self.supply.ensure_all()

    def adopt_worker(self, worker: WorkerHandle) -> None:
        """A copy of a kept worker the zygote adopted (``sandbox._adoption``): its exit is
        reported as a worker's."""
        assert self.supply is not None
        self.supply.workers[worker.pid] = worker

    def on_message(self, message: AboutWorkers, fds: list[int]) -> None:
        assert self.supply is not None
        self.supply.on_message(message, fds)

    def on_lost(self) -> None:
        assert self.supply is not None
        self.supply.kill_all()
        self.supply.drop_all()

    def on_broken(self, why: str) -> None:
        assert self.supply is not None
        self.supply.wake_all()
