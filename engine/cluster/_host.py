"""``ClusterHost``: a ``RayEngine`` behind the host protocol (``engine._host.Host``), so that
``a2e serve --http`` and every transport built on a host serve the whole cluster.

Each host connection is one ``ClusterTransport`` pinned to a node (the less loaded of two):
a WebSocket peer's session lives on that node. The service's loop must never block, and Ray
calls can (opening a session on a node): each connection sends from a thread of its own, in
order, and a second thread hands the replies to the loop.

Each session a front-end opens (a REST request's, an E2B sandbox's) is opened by one node
through Ray, awaited on the loop, and then spoken to over the driver's channel
(``NodeSession``); forking and pausing it are asked of that node the same way, so that copies
stay where their interpreter's memory is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
import uuid
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from a2e._codec import ProtocolError
from a2e._messages import A2EError, A2EMessage, ErrorCode
from a2e._transport import TransportClosed
from a2e_engine.engine._host import HostClosed, HostSession, HostStatus, Refused, Send
from a2e_engine.engine._loop import EngineLoop
from a2e_engine.engine._policy import Policy
from a2e_engine.engine.cluster._channel import ChannelLost
from a2e_engine.engine.cluster._links import NodeInfo, NodeLink, one_line
from a2e_engine.engine.cluster._node_session import NodeSession
from a2e_engine.engine.cluster._transport import ClusterTransport, Nodes

__all__ = ["ClusterHost"]

log = logging.getLogger("a2e.cluster")
T = TypeVar("T")

#: How often ``finish`` looks whether the connection's last call has ended.
FINISH_POLL_S = 0.05
#: How many nodes opening a session tries before it is refused.
OPEN_TRIES = 3
#: How long a node may take to answer what the host asks of it through Ray (a fork waits
#: for its copies, at most ``engine._session_forks``' own bound).
ASK_TIMEOUT_S = 90.0


class Cluster(Nodes, Protocol):
    """What the host needs of the ``RayEngine``: placement, and the nodes' load."""

    def nodes(self) -> list[NodeInfo]:
        """The nodes with a running engine."""

    def place(self, by_memory: bool, exclude: frozenset[str] = frozenset()) -> NodeLink | None:
        """The node a new session should go to (``RayEngine.place``)."""


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
        """A session that one node opens and keeps (``NodeSession``), with every option as
        the node's own ``Engine.open_session`` takes it. A stateless one goes where calls
        are fewest; one that keeps state (an E2B sandbox's), where memory is freest. A node
        that cannot be reached is given up and the next one tried."""
        options = {"stateless": stateless, "tenant": tenant, "lasting": lasting, "home": home}
        tried: frozenset[str] = frozenset()
        refused: Refused | None = None
        for _ in range(OPEN_TRIES):
            link = self.cluster.place(by_memory=not stateless, exclude=tried)
            if link is None:
                break
            tried |= {link.node_id}
            conn_id = uuid.uuid4().hex
            try:
                opened = await _answer(
                    link, link.actor.open_session.remote(conn_id, client, policy, options)
                )
            except ChannelLost as exc:  # given up off the loop: it kills the actor
                await asyncio.get_running_loop().run_in_executor(
                    None, self.cluster.report_lost, link, str(exc)
                )
                continue
            except Refused as exc:
                if not exc.error.retryable:
                    raise
                refused = exc  # that node is full: another may not be
                continue
            return NodeSession(link, conn_id, opened, self.loop)
        if refused is not None:
            raise refused
        raise Refused(
            A2EError(
                code=ErrorCode.OVERLOADED,
                message="no node of the cluster could open a session",
                retryable=True,
            )
        )

    async def fork_session(self, session: HostSession, count: int) -> list[HostSession]:
        """Copies made by the node the session is on (``Engine.fork_session`` there): each
        stays on that node, as its interpreter and files do."""
        link, conn_id = _on_node(session)
        copies = [uuid.uuid4().hex for _ in range(count)]
        try:
            answer = await _answer(link, link.actor.fork.remote(conn_id, copies))
        except ChannelLost:
            raise _node_lost(link) from None
        return [
            NodeSession(link, copy_id, opened, self.loop)
            for copy_id, opened in zip(copies, answer["copies"], strict=True)
        ]

    async def pause_session(self, session: HostSession, paused: bool) -> str:
        """Paused or resumed by the node the session is on (``Engine.pause_session``)."""
        link, conn_id = _on_node(session)
        try:
            answer = await _answer(link, link.actor.pause.remote(conn_id, paused))
        except ChannelLost:
            raise _node_lost(link) from None
        return str(answer["how"])

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


async def _answer(link: NodeLink, ref: Any) -> dict[str, Any]:
    """What the node answered through Ray (``NodeEngine``). ``ChannelLost`` when its actor is
    gone (Ray says so); ``Refused`` for its refusal, for no answer within ``ASK_TIMEOUT_S``
    (retryable: a busy node is not a lost one), and for the node's own failure (logged)."""
    from ray.exceptions import RayActorError

    tag = link.tag
    try:
        answer: dict[str, Any] = await asyncio.wait_for(
            asyncio.wrap_future(ref.future()), ASK_TIMEOUT_S
        )
    except TimeoutError:
        raise Refused(
            A2EError(
                code=ErrorCode.OVERLOADED,
                message=f"node {tag} of the cluster did not answer within {ASK_TIMEOUT_S:g} s",
                retryable=True,
            )
        ) from None
    except RayActorError as exc:
        raise ChannelLost(one_line(exc)) from None
    except Exception as exc:  # the node's method raised: the engine's own bug
        log.error("node %s failed a request: %s", link.node_id, one_line(exc))
        raise Refused(
            A2EError(code=ErrorCode.INTERNAL, message=f"internal error on node {tag}")
        ) from None
    if "refused" in answer:
        raise Refused(A2EError.model_validate(answer["refused"]))
    return answer


def _on_node(session: HostSession) -> tuple[NodeLink, str]:
    """Where ``session`` lives, if it is one of a node's and open; else ``Refused``."""
    if not isinstance(session, NodeSession) or session.closed:
        why = getattr(session, "ended_because", "") or "no such open session"
        raise Refused(A2EError(code=ErrorCode.UNKNOWN_SESSION, message=why))
    return session.link, session.conn_id


def _node_lost(link: NodeLink) -> Refused:
    """What a session's holder is told of its node's loss (the why is in the log)."""
    return Refused(
        A2EError(code=ErrorCode.INTERNAL, message=f"node {link.tag} of the cluster was lost")
    )
