"""``ZygoteControl``: the supervisor's line to its zygote, and the zygote's restarts.

It starts the zygote (a fresh interpreter, ``sandbox._launch``), reads its control messages on
the event loop (checked, ``sandbox._messages``) and hands them on, sends it ``spawn`` and
``stop``, and when the zygote dies, tells its listener (whose workers went with it) and starts a
new one: one restart loop at a time, and more than five deaths within a minute mark the sandbox
broken for good. It knows nothing of workers beyond the messages about them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from a2e_engine.sandbox._cgroups import made_by, remove_cgroup_tree
from a2e_engine.sandbox._launch import join_or_kill, spawn_zygote
from a2e_engine.sandbox._messages import (
    CONTROL_MAX,
    AboutWorkers,
    Adopt,
    ControlMessage,
    Ready,
    check_control,
    control,
)
from a2e_engine.sandbox._messages import Adopted as AdoptedMessage
from a2e_engine.sandbox._messages import Copied as CopiedMessage
from a2e_engine.sandbox._messages import Placed as PlacedMessage
from a2e_engine.sandbox.layers import LayerReports

__all__ = ["Control", "ControlFactory", "SandboxUnavailable", "ZygoteControl", "ZygoteListener"]

log = logging.getLogger("a2e.sandbox")

#: More deaths than this within ``RESTART_WINDOW_S`` and the sandbox is broken.
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0


class SandboxUnavailable(RuntimeError):
    """The zygote could not be started (or keeps dying)."""


class ZygoteListener(Protocol):
    def refusal(self, hello: Ready) -> str | None:
        """Why a zygote that said it is ready must not serve (``None``: it may): it is then
        stopped and its start fails with that reason. Asked before ``on_ready``."""

    def on_ready(self, hello: Ready) -> None:
        """A zygote (the first or a restarted one) is ready: its ``ready`` message."""

    def on_message(self, message: AboutWorkers, fds: list[int]) -> None:
        """What the zygote says of its workers, checked, and the fds it carried (the
        listener's now)."""

    def on_lost(self) -> None:
        """The zygote died: its workers died with it."""

    def on_broken(self, why: str) -> None:
        """No zygote will be started again."""


class Control(Protocol):
    """What a ``PluginZygote`` asks of its control (``ZygoteControl``, or a test's stand-in)."""

    called: str  # how messages name it
    broken: str | None  # why no zygote will be started again
    starts: int

    async def start(self) -> Ready: ...

    async def stop(self) -> None: ...

    @property
    def up(self) -> bool: ...

    def spawn(self, profile: str, count: int) -> bool: ...

    def narrow(self, pid: int, keep: str) -> None: ...

    async def adopt(
        self,
        pid: int,
        copies: list[dict[str, int]],
        binds: list[list[list[str]]],
        uids: list[int | None],
    ) -> tuple[list[Copied], asyncio.Future[None]]: ...


#: A copy the zygote adopted (``sandbox._adoption``): its host pid, and its job pipe's write
#: end, result pipe's read end and pidfd, the caller's to close.
Copied = tuple[int, list[int]]

#: What an ``adopt`` gives: the copies, and what is done once they are placed.
Adoption = tuple[list[Copied], "asyncio.Future[None]"]

#: A control made from the zygote's settings and plugins, its listener, start timeout and name.
ControlFactory = Callable[[str, bytes, ZygoteListener, float, str], Control]


class ZygoteControl:
    def __init__(
        self,
        settings_json: str,
        plugins_blob: bytes,
        listener: ZygoteListener,
        start_timeout: float = 60.0,
        name: str = "",
    ) -> None:
        #: How messages name it: "the sandbox zygote" (of its plugins).
        self.called = f"the sandbox zygote of {name}" if name else "the sandbox zygote"
        self._settings_json = settings_json
        self._plugins_blob = plugins_blob
        self._listener = listener
        self._start_timeout = start_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._process: Any = None
        self._sock: socket.socket | None = None
        self._ready: asyncio.Future[Ready] | None = None
        self._deaths: list[float] = []
        self._restart_task: asyncio.Task[None] | None = None
        self._cgroups: list[str] = []  # every zygote's, removed at stop
        self._stopping = False
        self.broken: str | None = None
        self.starts = 0  # zygotes that became ready: the first, then each restart
        #: Forks being adopted, by the forking worker's pid: the copies sent so far, and
        #: what waits for the end.
        self._adopting: dict[int, tuple[list[Copied], asyncio.Future[Adoption]]] = {}
        #: Adopted forks whose copies are being placed, by the first copy's pid.
        self._placing: dict[int, asyncio.Future[None]] = {}

    async def start(self) -> Ready:
        """Start a zygote and wait until it is ready; its ``ready`` message (also given to the
        listener). ``SandboxUnavailable`` if it failed or did not answer in time."""
        self._loop = asyncio.get_running_loop()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        process = spawn_zygote(child, self._settings_json, self._plugins_blob)
        child.close()
        parent.setblocking(False)
        self._process, self._sock = process, parent
        self._ready = self._loop.create_future()
        self._loop.add_reader(parent.fileno(), self._on_readable, parent)
        try:
            hello = await asyncio.wait_for(self._ready, self._start_timeout)
        except (TimeoutError, SandboxUnavailable):
            self._close()
            await self._loop.run_in_executor(None, join_or_kill, process, 0.0)
            raise
        self._cgroups += made_by(LayerReports(hello["layers"]))
        refused = self._listener.refusal(hello)
        if refused is not None:
            with contextlib.suppress(OSError):
                # It removes what it made, with no worker forked.
                parent.send(control({"op": "stop"}))
            self._close()
            await self._loop.run_in_executor(None, join_or_kill, process)
            raise SandboxUnavailable(f"{self.called} may not serve: {refused}")
        self.starts += 1
        self._listener.on_ready(hello)
        return hello

    async def stop(self) -> None:
        self._stopping = True
        restart, self._restart_task = self._restart_task, None
        if restart is not None and not restart.done():
            restart.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await restart
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.send(control({"op": "stop"}))
        process = self._process
        self._close()
        if process is not None:
            await asyncio.get_running_loop().run_in_executor(None, join_or_kill, process)
        for path in self._cgroups:
            remove_cgroup_tree(path)

    @property
    def up(self) -> bool:
        """A zygote is there to ask for workers (not between a death and its restart)."""
        return self._sock is not None and not self._stopping and self.broken is None

    def spawn(self, profile: str, count: int) -> bool:
        """Ask for ``count`` workers of ``profile``; False if there is no zygote to ask."""
        if self._sock is None or self._stopping:
            return False
        try:
            self._sock.send(control({"op": "spawn", "profile": profile, "count": count}))
        except OSError as exc:
            self._lost(f"sending to it failed: {exc}")
            return False
        return True

    def narrow(self, pid: int, keep: str) -> None:
        """Worker ``pid``, now kept for a session whose mount is ``keep``: its namespace is to
        let go of every other session's mount (``sandbox._quota.narrow``)."""
        if self._sock is None or self._stopping:
            return
        try:
            self._sock.send(control({"op": "narrow", "pid": pid, "keep": keep}))
        except OSError as exc:
            self._lost(f"sending to it failed: {exc}")

    async def adopt(
        self,
        pid: int,
        copies: list[dict[str, int]],
        binds: list[list[list[str]]],
        uids: list[int | None],
    ) -> tuple[list[Copied], asyncio.Future[None]]:
        """The copies kept worker ``pid`` forked (``sandbox._forks``), adopted by the zygote
        (``sandbox._adoption``): each one's host pid and fds, and what is done once they are
        placed (mounted, in their cgroup slots: none may run before; its exception, if they
        could not be, and are killed). ``ValueError`` with the zygote's reason if it refused
        them (it killed them), ``SandboxUnavailable`` if it is gone."""
        if self._sock is None or self._stopping or self._loop is None:
            raise SandboxUnavailable(f"{self.called} is not running")
        if pid in self._adopting:
            raise ValueError("that worker is being forked already")
        done: asyncio.Future[Adoption] = self._loop.create_future()
        self._adopting[pid] = ([], done)
        try:
            message: Adopt = {
                "op": "adopt",
                "pid": pid,
                "copies": copies,
                "binds": binds,
                "uids": uids,
            }
            self._sock.send(control(message))
            return await done
        except OSError as exc:
            self._lost(f"sending to it failed: {exc}")
            raise SandboxUnavailable(f"{self.called} is gone") from None
        finally:
            sent, _ = self._adopting.pop(pid, ([], done))
            if not done.done() or done.cancelled() or done.exception() is not None:
                for _, fds in sent:
                    _close_all(fds)

    def _placed(self, message: PlacedMessage) -> None:
        placed = self._placing.pop(message["pid"], None)
        if placed is None or placed.done():
            return
        if message["error"]:
            placed.set_exception(SandboxUnavailable(message["error"]))
        else:
            placed.set_result(None)

    def _adopted(self, message: CopiedMessage | AdoptedMessage, fds: list[int]) -> None:
        """A ``copied`` or ``adopted`` message, for the ``adopt`` that waits for it."""
        pending = self._adopting.get(message["parent"])
        if pending is None or pending[1].done():
            _close_all(fds)
            return
        sent, done = pending
        if message["op"] == "copied":
            if len(fds) == 3:
                sent.append((message["pid"], fds))
            else:
                _close_all(fds)
        elif message["error"]:
            done.set_exception(ValueError(message["error"]))
        else:
            assert self._loop is not None
            placed: asyncio.Future[None] = self._loop.create_future()
            placed.add_done_callback(_unplaced)
            if sent:  # its ``placed`` may come at once
                self._placing[sent[0][0]] = placed
            else:
                placed.set_result(None)
            done.set_result((list(sent), placed))

    def _close(self) -> None:
        if self._sock is not None and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
        self._sock = None

    def _on_readable(self, sock: socket.socket) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, CONTROL_MAX, 4)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b"", []
            if not data:
                _close_all(fds)
                self._lost("its control socket closed")
                return
            for fd in fds:
                os.set_inheritable(fd, False)
            try:
                message = check_control(json.loads(data))
            except ValueError as exc:  # MalformedMessage, or not JSON at all
                log.error("the zygote sent a malformed control message: %s", exc)
                _close_all(fds)
                continue
            try:
                self._dispatch(message, fds)
            except Exception:
                log.exception("handling a control message from the zygote failed")
                _close_all(fds)

    def _dispatch(self, message: ControlMessage, fds: list[int]) -> None:
        if message["op"] == "ready":
            _close_all(fds)
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(message)
        elif message["op"] == "fatal":
            _close_all(fds)
            error = SandboxUnavailable(f"{self.called} failed to start: {message['error']}")
            log.error("%s\n%s", error, message["traceback"])
            if self._ready is not None and not self._ready.done():
                self._ready.set_exception(error)
        elif message["op"] in ("worker", "exit", "spawn_failed"):
            self._listener.on_message(message, fds)
        elif message["op"] == "copied" or message["op"] == "adopted":
            self._adopted(message, fds)
        elif message["op"] == "placed":
            _close_all(fds)
            self._placed(message)
        else:
            _close_all(fds)  # the supervisor's own messages, sent back: not the zygote's to say

    def _lost(self, why: str) -> None:
        if self._stopping:
            return
        if self._ready is not None and not self._ready.done():
            # It died while starting: whoever waits for it (the restart loop) sees this.
            self._ready.set_exception(SandboxUnavailable(f"the new zygote died: {why}"))
            return
        log.error("%s died (%s); calls in flight fail, restarting it", self.called, why)
        self._close()
        waiting = [done for _, done in self._adopting.values()] + list(self._placing.values())
        self._placing.clear()
        for done in waiting:
            if not done.done():
                done.set_exception(SandboxUnavailable(f"{self.called} died: {why}"))
        self._listener.on_lost()
        if self._restart_task is None or self._restart_task.done():
            assert self._loop is not None
            self._restart_task = self._loop.create_task(self._restart(why))

    async def _restart(self, why: str) -> None:
        while not self._stopping:
            now = time.monotonic()
            self._deaths = [t for t in self._deaths if now - t < RESTART_WINDOW_S] + [now]
            if len(self._deaths) > MAX_RESTARTS:
                self.broken = (
                    f"{self.called} died {len(self._deaths)} times within a minute ({why})"
                )
                self._listener.on_broken(self.broken)
                return
            try:
                await self.start()
                return
            except Exception as exc:
                why = f"restart failed: {exc}"
                log.error("%s", why)
                await asyncio.sleep(0.5)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _unplaced(placed: asyncio.Future[None]) -> None:
    """Copies that could not be placed: each live one's first job says so (``ResidentWorker``);
    copies ended before any job (a fork killed at once: the placement finds them gone) have
    nobody to tell, and their failure is taken here rather than left for the loop to report."""
    if not placed.cancelled() and placed.exception() is not None:
        log.debug("copies not placed: %s", placed.exception())
