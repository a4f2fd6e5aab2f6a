"""The engine actor: one node's ``Engine``, its connections relayed to clients elsewhere.

Ray carries the rare things: starting the actor, ``describe`` (which includes where its
``Relay`` listens and the token that opens it), ``load``, opening and closing a client
connection, opening a session for a driver and forking or pausing it (each then served on a
connection of its own: ``served``), and stopping. The messages of the calls themselves go over
each driver's channel to the relay (``relay``), which runs on the engine's own loop: a Ray
actor call costs about a millisecond of CPU on each side, a frame on a socket a few tens of
microseconds.

The class is plain Python; ``backend`` makes it a Ray actor (async, so that the methods that
wait for the engine's loop never hold each other up).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Coroutine
from dataclasses import asdict
from typing import Any, TypeVar

from a2e._messages import A2EError, ErrorCode
from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine._config import EngineConfig
from a2e_engine.engine._host import HostSession, Refused
from a2e_engine.engine._host_session import LocalSession
from a2e_engine.engine._policy import Policy, PolicyFunction
from a2e_engine.engine.cluster._relay import Relay

__all__ = ["NodeEngine"]


T = TypeVar("T")


class NodeEngine:
    """An ``Engine`` on this node, and the relay that serves it to drivers."""

    def __init__(
        self,
        plugins: list[ToolPlugin],
        config: EngineConfig,
        builtin_tools: bool,
        node_id: str,
        address: str,
        policy: Policy | PolicyFunction | None = None,
    ) -> None:
        from a2e_engine.engine._engine import Engine

        if not address:  # an empty host would listen on every interface
            raise ValueError(f"node {node_id} has no address to listen on")
        self.node_id = node_id
        self.engine = Engine(plugins, config, builtin_tools=builtin_tools, policy=policy).start()
        self.relay = Relay(self.engine, node_id)
        try:
            self.channel_address = self.engine.run(self.relay.listen(address), timeout=30)
        except BaseException:
            self.engine.stop()
            raise

    def describe(self) -> dict[str, Any]:
        """Who this is: the node, the process, the machine, the tools and which may be retried,
        where its relay listens and its token, and what its engine made on the machine (for
        checking that a lost one left nothing)."""
        definitions = self.engine.registry.definitions
        tools = {definition.name: definition.idempotent for definition in definitions}
        layers = self.engine.layers
        pool = self.engine.pool
        return {
            "node_id": self.node_id,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "idempotent": tools,
            "channel": {"address": list(self.channel_address), "token": self.relay.token.hex()},
            "state_dir": self.engine.state_dir,
            "zygote_pid": pool.zygote_pid if pool is not None else None,
            "layers": layers,
            "cgroups": [
                layers.fact(name, "path")
                for name in ("pids_cgroup", "memory_cgroup")
                if layers.active(name)
            ],
        }

    def load(self) -> dict[str, Any]:
        """The engine's status (``HostStatus``) for placement and ``RayEngine.nodes()``."""
        pool = self.engine.pool
        return {
            "node_id": self.node_id,
            "zygote_pids": pool.zygote_pids() if pool is not None else [],
            **asdict(self.engine.status()),
        }

    async def open(self, conn_id: str, policy: Policy | None) -> None:
        """A client connection, whose frames the relay takes from the first channel that
        sends one."""
        await self._on_engine_loop(self.relay.open(conn_id, policy))

    async def close(self, conn_id: str) -> None:
        await self._on_engine_loop(self.relay.close(conn_id))

    async def open_session(
        self, conn_id: str, client: str, policy: Policy | None, options: dict[str, Any]
    ) -> dict[str, Any]:
        """A session of this engine's (``Host.open_session`` with ``options``: ``stateless``,
        ``tenant``, ``lasting``, ``home``) served on connection ``conn_id``: what ``opened``
        says of it, or ``{"refused": error}`` (an ``A2EError`` as JSON: a refusal is an
        answer, not a failure of the actor)."""

        async def open_it() -> dict[str, Any]:
            try:
                session = await self.engine.open_session(client, policy=policy, **options)
            except Refused as exc:
                return {"refused": exc.error.model_dump(mode="json")}
            try:
                self.relay.attach(conn_id, session)
            except ValueError:
                session.close()
                raise
            return _opened(session)

        return await self._on_engine_loop(open_it())

    async def fork(self, conn_id: str, copies: list[str]) -> dict[str, Any]:
        """Copies of the session served on ``conn_id`` (``Host.fork_session``), one served on
        each connection of ``copies``: ``{"copies": [opened, ...]}`` or ``{"refused": ...}``."""

        async def fork_it() -> dict[str, Any]:
            session = self.relay.served(conn_id)
            try:
                if session is None:
                    raise _no_session(conn_id)
                made = await self.engine.fork_session(session, len(copies))
            except Refused as exc:
                return {"refused": exc.error.model_dump(mode="json")}
            served = [copy for copy in made if isinstance(copy, LocalSession)]  # all, an Engine's
            try:
                for copy_id, copy in zip(copies, served, strict=True):
                    self.relay.attach(copy_id, copy)
            except ValueError:
                for copy in served:
                    copy.close()
                raise
            return {"copies": [_opened(copy) for copy in served]}

        return await self._on_engine_loop(fork_it())

    async def pause(self, conn_id: str, paused: bool) -> dict[str, Any]:
        """The session served on ``conn_id`` paused or resumed (``Host.pause_session``):
        ``{"how": ...}`` or ``{"refused": ...}``."""

        async def pause_it() -> dict[str, Any]:
            session = self.relay.served(conn_id)
            try:
                if session is None:
                    raise _no_session(conn_id)
                return {"how": await self.engine.pause_session(session, paused)}
            except Refused as exc:
                return {"refused": exc.error.model_dump(mode="json")}

        return await self._on_engine_loop(pause_it())

    def stop(self) -> None:
        """Stop the engine: its workers, zygote, state directory and cgroups go with it."""
        self.engine.run(self.relay.stop(), timeout=30)
        self.engine.stop()

    async def _on_engine_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """The relay's state is the engine loop's alone; the actor's loop waits for it there."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.engine.loop))


def _opened(session: HostSession) -> dict[str, Any]:
    """What the driver needs of a session opened here: its id and where its files are."""
    return {"session_id": session.session_id, "workspace": getattr(session, "workspace", "")}


def _no_session(conn_id: str) -> Refused:
    return Refused(
        A2EError(
            code=ErrorCode.UNKNOWN_SESSION,
            message=f"no open session is served on connection {conn_id[:8]}",
        )
    )
