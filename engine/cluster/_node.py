"""The engine actor: one node's ``Engine``, its connections relayed to clients elsewhere.

Ray carries the rare things: starting the actor, ``describe`` (which includes where its
``Relay`` listens and the token that opens it), ``load``, opening and closing a client
connection, and stopping. The messages of the calls themselves go over each driver's channel
to the relay (``relay``), which runs on the engine's own loop: a Ray actor call costs about a
millisecond of CPU on each side, a frame on a socket a few tens of microseconds.

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

from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine._config import EngineConfig
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

    def stop(self) -> None:
        """Stop the engine: its workers, zygote, state directory and cgroups go with it."""
        self.engine.run(self.relay.stop(), timeout=30)
        self.engine.stop()

    async def _on_engine_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """The relay's state is the engine loop's alone; the actor's loop waits for it there."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.engine.loop))
