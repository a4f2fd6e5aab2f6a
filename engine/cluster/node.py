"""The engine actor: one node's ``Engine``, its connections relayed to clients elsewhere.

Each client connection of a driver is one host connection here (``open``); every request the
client sends is one ``exchange``, a Ray streaming generator that yields the replies to that
request as they come: for a streaming call, its events in batches (what one turn of the engine
loop sent at once) and then its response, which names this node (``usage.node_id``). Requests
whose replies all come at the end go through ``ask``, one plain actor call. Messages travel as
wire JSON and are decoded with the protocol's codec on each side.

The class is plain Python; ``backend`` makes it a Ray actor (async, so that a slow call's
stream never holds up another's). Replies arrive on the engine's loop thread and are handed to
the actor's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from a2e import codec
from a2e.caps.tools.models import ToolCallResponse, ToolCancelRequest, ToolEvent, ToolUsage
from a2e.caps.tools.plugin import ToolPlugin
from a2e.messages import A2EMessage
from a2e_engine.engine.config import EngineConfig
from a2e_engine.engine.host import HostClosed, HostConnection
from a2e_engine.engine.policy import Policy, PolicyFunction

__all__ = ["NodeEngine"]


class _Relayed:
    """One client connection: its host connection and the requests waiting for replies."""

    def __init__(self) -> None:
        self.host: HostConnection | None = None
        self.waiting: dict[str, asyncio.Queue[A2EMessage]] = {}


class NodeEngine:
    """An ``Engine`` on this node, and the connections relayed to it."""

    def __init__(
        self,
        plugins: list[ToolPlugin],
        config: EngineConfig,
        builtin_tools: bool,
        node_id: str,
        policy: Policy | PolicyFunction | None = None,
    ) -> None:
        from a2e_engine.engine.engine import Engine

        self.node_id = node_id
        self.engine = Engine(plugins, config, builtin_tools=builtin_tools, policy=policy).start()
        self.connections: dict[str, _Relayed] = {}

    def describe(self) -> dict[str, Any]:
        """Who this is: the node, the process, the machine, the tools and which may be retried,
        and what its engine made on the machine (for checking that a lost one left nothing)."""
        definitions = self.engine.registry.definitions
        tools = {definition.name: definition.idempotent for definition in definitions}
        layers = self.engine.layers
        pool = self.engine.pool
        return {
            "node_id": self.node_id,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "idempotent": tools,
            "state_dir": self.engine.state_dir,
            "zygote_pid": pool.zygote_pid if pool is not None else None,
            "layers": layers,
            "cgroups": [
                layers[name]["path"]
                for name in ("pids_cgroup", "memory_cgroup")
                if layers.get(name, {}).get("active")
            ],
        }

    def load(self) -> dict[str, Any]:
        """The engine's status (``HostStatus``) for placement and ``RayEngine.nodes()``."""
        return {"node_id": self.node_id, **asdict(self.engine.status())}

    async def open(self, conn_id: str, policy: Policy | None) -> None:
        loop = asyncio.get_running_loop()
        relayed = _Relayed()

        def arrive(message: A2EMessage) -> None:  # on the engine's loop thread
            waiting = relayed.waiting.get(getattr(message, "req_id", ""))
            if waiting is not None:
                loop.call_soon_threadsafe(waiting.put_nowait, message)
            # Anything else answers what nobody waits for (a cancel that came too late).

        relayed.host = self.engine.open_connection(arrive, policy=policy, name="ray")
        self.connections[conn_id] = relayed

    async def exchange(self, conn_id: str, line: str) -> AsyncIterator[list[str]]:
        """Send one request of the client's; yield its replies, a batch at a time."""
        relayed = self.connections.get(conn_id)
        try:
            message = codec.decode(line)
        except codec.ProtocolError as exc:  # too large, say: the client's answer, not a fault
            yield [codec.encode(exc.to_message())]
            return
        if relayed is None or relayed.host is None:
            raise HostClosed(f"connection {conn_id} is not open on node {self.node_id}")
        if isinstance(message, ToolCancelRequest):
            relayed.host.receive(message)
            return
        replies: asyncio.Queue[A2EMessage] = asyncio.Queue()
        relayed.waiting[message.id] = replies
        try:
            relayed.host.receive(message)
            while True:
                batch = [await replies.get()]
                while not replies.empty():
                    batch.append(replies.get_nowait())
                yield [codec.encode(self._named(reply)) for reply in batch]
                if any(type(reply) is not ToolEvent for reply in batch):
                    return
        finally:
            relayed.waiting.pop(message.id, None)

    async def ask(self, conn_id: str, line: str) -> list[str]:
        """Send one request whose replies come at the end (everything but a streaming call:
        a call that does not stream keeps its events in its result); all of them at once,
        which spares Ray a report per item and one for the stream's end."""
        replies = []
        async for batch in self.exchange(conn_id, line):
            replies.extend(batch)
        return replies

    def _named(self, reply: A2EMessage) -> A2EMessage:
        """A call's response with this node's id in its usage."""
        if not isinstance(reply, ToolCallResponse):
            return reply
        usage = reply.data.usage or ToolUsage()
        result = reply.data.model_copy(
            update={"usage": usage.model_copy(update={"node_id": self.node_id})}
        )
        return reply.model_copy(update={"data": result})

    async def close(self, conn_id: str) -> None:
        self._end(conn_id)

    def stop(self) -> None:
        """Stop the engine: its workers, zygote, state directory and cgroups go with it."""
        for conn_id in list(self.connections):
            self._end(conn_id)
        self.engine.stop()

    def _end(self, conn_id: str) -> None:
        """End one relayed connection: its calls are cancelled, its sessions end."""
        relayed = self.connections.pop(conn_id, None)
        if relayed is not None and relayed.host is not None:
            with contextlib.suppress(HostClosed):
                relayed.host.close()
