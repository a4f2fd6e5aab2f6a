"""``ClusterHost``: a ``RayEngine`` behind the host protocol (``engine._host.Host``), so that
``a2e serve --http`` and every transport built on a host serve the whole cluster.

Each host connection is one ``ClusterTransport`` pinned to a node (the less loaded of two):
a WebSocket peer's session, or one REST call's conversation, lives on that node. The service's
loop must never block, and Ray calls can (opening a session on a node): each connection sends
from a thread of its own, in order, and a second thread hands the replies to the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
import time
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from a2e._codec import ProtocolError
from a2e._messages import A2EError, A2EMessage, ErrorCode
from a2e._transport import TransportClosed
from a2e_engine.engine._host import HostClosed, HostSession, HostStatus, Refused, Send
from a2e_engine.engine._loop import EngineLoop
from a2e_engine.engine._policy import Policy
from a2e_engine.engine.cluster._links import NodeInfo
from a2e_engine.engine.cluster._transport import ClusterTransport, Nodes
from a2e_engine.engine.transports._conversation import open_wire_session

__all__ = ["ClusterHost"]

T = TypeVar("T")

#: How often ``finish`` looks whether the connection's last call has ended.
FINISH_POLL_S = 0.05


class Cluster(Nodes, Protocol):
    """What the host needs of the ``RayEngine``: placement, and the nodes' load."""

    def nodes(self) -> list[NodeInfo]:
        """The nodes with a running engine."""


class ClusterHost:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._loop = EngineLoop()

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop.loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self._loop.run(coro, timeout)

    def open_connection(
        self, send: Send, *, policy: Policy | None = None, name: str = "", tenant: str = ""
    ) -> _RelayedConnection:
        node = self.cluster.pick()
        if node is None:
            raise HostClosed("no node of the cluster has a running engine")
        transport = ClusterTransport(self.cluster, node, policy)
        return _RelayedConnection(transport, send, self.loop, name)

    async def open_session(
        self,
        client: str,
        *,
        policy: Policy | None = None,
        stateless: bool = False,
        tenant: str = "",
        lasting: bool = False,
        home: str = "",
    ) -> HostSession:
        """A session over a connection (its nodes have the sessions: one is opened on the one
        the connection is pinned to); ``stateless`` changes nothing here, nor ``tenant``: each
        node judges memory by its own sessions; nor ``lasting`` and ``home``: a wire
        session's worker is kept as the node's limits say, in its workspace."""
        return await open_wire_session(self, client, policy)

    async def fork_session(self, session: HostSession, count: int) -> list[HostSession]:
        """Not across the cluster yet: a wire session has no way to ask its node for copies."""
        raise Refused(
            A2EError(
                code=ErrorCode.INTERNAL,
                message="cannot fork: sandboxes are not forked across a Ray cluster yet",
            )
        )

    async def pause_session(self, session: HostSession, paused: bool) -> str:
        """Not across the cluster yet: a wire session has no way to ask its node to pause."""
        raise Refused(
            A2EError(
                code=ErrorCode.INTERNAL,
                message="cannot pause: sandboxes are not paused across a Ray cluster yet",
            )
        )

    def status(self) -> HostStatus:
        nodes = self.cluster.nodes()
        if not nodes:
            return HostStatus(ready=False, why_not_ready="no node of the cluster has an engine")
        return HostStatus(
            ready=True,
            why_not_ready="",
            calls_pending=sum(max(n.in_flight, n.calls_pending) for n in nodes),
            calls_running=sum(n.calls_running for n in nodes),
            workers_waiting=sum(n.workers_waiting for n in nodes),
        )


class _RelayedConnection:
    """A host connection that is a ``ClusterTransport``: messages in through the sender
    thread, replies out through the reader thread onto the service's loop."""

    def __init__(
        self,
        transport: ClusterTransport,
        send: Send,
        loop: asyncio.AbstractEventLoop,
        name: str,
    ) -> None:
        self._transport = transport
        self._send = send
        self._loop = loop
        self._outbox: queue.SimpleQueue[A2EMessage | None] = queue.SimpleQueue()
        self._closed = False
        for target, role in ((self._sending, "send"), (self._reading, "read")):
            threading.Thread(target=target, name=f"a2e-ray-{role} {name}", daemon=True).start()

    def receive(self, message: A2EMessage | ProtocolError) -> None:
        if self._closed:
            raise HostClosed("the connection is closed")
        if isinstance(message, ProtocolError):
            self._reply(message.to_message())
            return
        self._outbox.put(message)

    def finish(self) -> concurrent.futures.Future[None]:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def wait_for_calls() -> None:
            while self._transport.calls_in_flight() and not self._closed:
                time.sleep(FINISH_POLL_S)
            self.close()
            done.set_result(None)

        threading.Thread(target=wait_for_calls, name="a2e-ray-finish", daemon=True).start()
        return done

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._outbox.put(None)
        self._transport.close()

    def _reply(self, message: A2EMessage) -> None:
        try:
            self._loop.call_soon_threadsafe(self._send, message)
        except RuntimeError:  # the loop stopped: nobody to tell
            pass

    def _sending(self) -> None:
        while (message := self._outbox.get()) is not None:
            try:
                self._transport.send(message)
            except TransportClosed:
                return

    def _reading(self) -> None:
        while (message := self._transport.receive()) is not None:
            self._reply(message)
