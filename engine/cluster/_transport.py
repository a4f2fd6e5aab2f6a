"""``ClusterTransport``: an ``A2EClient``'s connection to a ``RayEngine``'s nodes.

Pinned (``connect()``), every request goes to one node, where the session and its workspace
live; if that node is lost, its calls in flight fail with ``tool_error`` naming it and the
connection ends with the reason (the session is gone with the node). Spread
(``connect(spread=True)``), each call goes to the node that placement picks; the client's one
handshake is repeated on each node the first time it is used there (a session per node,
request session ids rewritten), and a call of an idempotent tool that was running on a lost
node runs again on another one, within its timeout.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from a2e import _codec as codec
from a2e._messages import A2EError, A2EMessage, ErrorCode, HandshakeRequest, HandshakeResponse
from a2e._transport import DirectRoute, TransportClosed
from a2e.caps.tools._models import (
    FailureReason,
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolErrorCode,
    ToolResult,
)
from a2e_engine.engine._policy import Policy
from a2e_engine.engine.cluster._channel import ChannelLost, Lost, NodeChannel
from a2e_engine.engine.cluster._links import NodeLink

__all__ = ["ClusterTransport", "Nodes", "failed_result"]

#: How long opening a connection or a session on a node may take.
OPEN_TIMEOUT_S = 60.0


class Nodes(Protocol):
    """What a transport needs of the ``RayEngine``."""

    def pick(self, exclude: frozenset[str] = frozenset()) -> NodeLink | None:
        """The node a new call or session should go to; ``None`` if no node has an engine."""

    def report_lost(self, link: NodeLink, why: str) -> None:
        """``link`` failed: stop placing calls there until it is replaced."""


@dataclass
class _NodeSession:
    link: NodeLink
    conn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    session_id: str = ""


@dataclass
class _Call:
    request: ToolCallRequest
    session: _NodeSession
    started: float = field(default_factory=time.monotonic)


class ClusterTransport:
    def __init__(self, nodes: Nodes, pinned: NodeLink | None, policy: Policy | None) -> None:
        self._nodes = nodes
        self._pinned = pinned
        self._policy = policy
        self._inbox: queue.SimpleQueue[A2EMessage | None] = queue.SimpleQueue()
        self._lock = threading.RLock()
        self._opening = threading.Lock()  # held while a session is opened on a node
        self._handshake: HandshakeRequest | None = None
        self._sessions: dict[str, _NodeSession] = {}  # node id -> our session there
        self._calls: dict[str, _Call] = {}
        self._closed = False
        self._route: DirectRoute | None = None
        self.close_reason = ""

    # -- ClientTransport --

    def route_directly(self, route: DirectRoute) -> None:
        """Replies go from the channel's reader thread straight to the request waiting for
        them, not through the client's reader thread: one thread hand-over less per call."""
        self._route = route

    def send(self, message: A2EMessage) -> None:
        if self._closed:
            raise TransportClosed(self.close_reason or "the cluster transport is closed")
        if isinstance(message, HandshakeRequest):
            self._send_handshake(message)
        elif isinstance(message, ToolCallRequest):
            self._send_call(message)
        elif isinstance(message, ToolCancelRequest):
            self._send_cancel(message)
        else:
            self._send_other(message)

    def receive(self) -> A2EMessage | None:
        message = self._inbox.get()
        if message is None:
            self._inbox.put(None)  # later receivers see the end too
        return message

    def calls_in_flight(self) -> int:
        with self._lock:
            return len(self._calls)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions = list(self._sessions.values())
        for session in sessions:
            try:
                session.link.actor.close.remote(session.conn_id)
            except Exception:  # the actor is gone: so is the connection
                pass
        self._inbox.put(None)

    # -- requests --

    def _send_handshake(self, request: HandshakeRequest) -> None:
        link = self._pinned or self._nodes.pick()
        if link is None:
            self._deliver(_error(request.id, "no node of the cluster has a running engine"))
            return
        self._handshake = request
        try:
            session = self._open(link)
        except Exception as exc:
            self._node_lost(link, str(exc))
            self._deliver(_error(request.id, f"node {link.node_id} could not be reached: {exc}"))
            return

        def deliver(reply: A2EMessage) -> None:
            if isinstance(reply, HandshakeResponse):
                session.session_id = reply.session_id
            self._deliver(reply)

        self._exchange(
            session,
            request,
            deliver,
            partial(self._request_lost, request, link),
        )

    def _send_other(self, request: A2EMessage) -> None:
        with self._lock:
            session = next(iter(self._sessions.values()), None)
        if session is None:
            try:  # spread, and the node of every session so far was lost: a new one
                session = self._session_for_call(frozenset())
            except _NoNode as exc:
                self._deliver(_error(request.id, str(exc)))
                return
        link = session.link
        self._exchange(
            session,
            request,
            self._deliver,
            partial(self._request_lost, request, link),
        )

    def _send_call(self, request: ToolCallRequest, exclude: frozenset[str] = frozenset()) -> None:
        try:
            session = self._session_for_call(exclude)
        except _NoNode as exc:
            self._deliver(failed_result(request, str(exc), FailureReason.SANDBOX_UNAVAILABLE))
            return
        call = _Call(request, session)
        with self._lock:
            self._calls[request.id] = call
        session.link.started_call()

        def deliver(reply: A2EMessage) -> None:
            if isinstance(reply, ToolCallResponse | A2EError):
                self._call_ended(request.id)
            self._deliver(reply)

        self._exchange(session, request, deliver, partial(self._call_lost, call))

    def _send_cancel(self, request: ToolCancelRequest) -> None:
        with self._lock:
            call = self._calls.get(request.req_id)
        if call is None:
            return  # it ended already, or never ran here: nothing to cancel
        line = self._line_for(call.session, request, self._deliver)
        if line is not None:
            with contextlib.suppress(ChannelLost):  # the call fails with its node anyway
                _channel(call.session.link).post(call.session.conn_id, line)

    # -- sessions on nodes --

    def _open(self, link: NodeLink) -> _NodeSession:
        import ray

        session = _NodeSession(link)
        ray.get(link.actor.open.remote(session.conn_id, self._policy), timeout=OPEN_TIMEOUT_S)
        with self._lock:
            self._sessions[link.node_id] = session
        return session

    def _session_for_call(self, exclude: frozenset[str]) -> _NodeSession:
        if self._pinned is not None:
            with self._lock:
                session = self._sessions.get(self._pinned.node_id)
            if session is None or not session.session_id:
                raise _NoNode("the handshake has not been done")
            return session
        link = self._nodes.pick(exclude)
        if link is None:
            raise _NoNode("no node of the cluster has a running engine")
        with self._lock:
            session = self._sessions.get(link.node_id)
        if session is not None and session.session_id:
            return session
        with self._opening:  # two calls at once open one session on a new node, not two
            with self._lock:
                session = self._sessions.get(link.node_id)
            if session is not None and session.session_id:
                return session
            return self._handshake_on(link)

    def _handshake_on(self, link: NodeLink) -> _NodeSession:
        """This client's handshake repeated on ``link``, for a session of its own there."""
        if self._handshake is None:
            raise _NoNode("the handshake has not been done")
        try:
            session = self._open(link)
            request = self._handshake.model_copy(update={"id": uuid.uuid4().hex})
            replies = _channel(link).ask(session.conn_id, request, OPEN_TIMEOUT_S)
            for reply in replies:
                if isinstance(reply, HandshakeResponse):
                    session.session_id = reply.session_id
                elif isinstance(reply, A2EError):
                    raise _NoNode(f"node {link.node_id} refused the handshake: {reply.message}")
        except _NoNode:
            raise
        except Exception as exc:
            self._node_lost(link, str(exc))
            raise _NoNode(f"node {link.node_id} could not be reached: {exc}") from None
        if not session.session_id:
            raise _NoNode(f"node {link.node_id} did not answer the handshake")
        return session

    # -- the node's channel --

    def _exchange(
        self,
        session: _NodeSession,
        request: A2EMessage,
        deliver: Callable[[A2EMessage], None],
        lost: Lost,
    ) -> None:
        line = self._line_for(session, request, deliver)
        if line is None:
            return
        try:
            _channel(session.link).request(session.conn_id, request.id, line, deliver, lost)
        except ChannelLost as exc:
            lost(str(exc))

    def _line_for(
        self, session: _NodeSession, request: A2EMessage, deliver: Callable[[A2EMessage], None]
    ) -> str | None:
        """``request`` as the node's session knows it, on the wire; or ``None``, the refusal
        delivered, when it is too large (the node would refuse it without knowing whose)."""
        if session.session_id and hasattr(request, "session_id"):
            request = request.model_copy(update={"session_id": session.session_id})
        line = codec.encode(request)
        try:
            codec.check_size(line, request.id)
        except codec.ProtocolError as exc:
            deliver(exc.to_message())
            return None
        return line

    def _deliver(self, message: A2EMessage) -> None:
        if self._closed:
            return
        route = self._route
        if route is None or not route(message):
            self._inbox.put(message)

    def _call_ended(self, req_id: str) -> None:
        with self._lock:
            call = self._calls.pop(req_id, None)
        if call is not None:
            call.session.link.ended_call()

    # -- losses --

    def _node_lost(self, link: NodeLink, why: str) -> None:
        self._nodes.report_lost(link, why)
        with self._lock:
            session = self._sessions.get(link.node_id)
            if session is not None and session.link is link:
                del self._sessions[link.node_id]

    def _request_lost(self, request: A2EMessage, link: NodeLink, why: str) -> None:
        self._node_lost(link, why)
        self._deliver(_error(request.id, f"node {link.node_id} was lost: {why}"))
        if self._pinned is not None:
            self._end_pinned(link, why)

    def _call_lost(self, call: _Call, why: str) -> None:
        link = call.session.link
        with self._lock:
            still_ours = self._calls.get(call.request.id) is call
            if still_ours:
                del self._calls[call.request.id]
        if not still_ours:
            return
        link.ended_call()
        self._node_lost(link, why)
        if self._pinned is not None:
            self._deliver(failed_result(call.request, f"node {link.node_id} was lost: {why}"))
            self._end_pinned(link, why)
            return
        left = call.request.timeout - (time.monotonic() - call.started)
        if link.idempotent.get(call.request.tool_name) and left > 1:
            retry = call.request.model_copy(update={"timeout": max(1, int(left))})
            threading.Thread(
                target=self._send_call,
                args=(retry, frozenset({link.node_id})),
                name="a2e-ray-retry",
                daemon=True,
            ).start()
            return
        self._deliver(failed_result(call.request, f"node {link.node_id} was lost: {why}"))

    def _end_pinned(self, link: NodeLink, why: str) -> None:
        """The session lived on ``link``: its calls fail, and the connection ends with why."""
        with self._lock:
            if self._closed:
                return
            calls = list(self._calls.values())
            self._calls.clear()
            self.close_reason = f"the session's node {link.node_id} was lost: {why}"
            self._closed = True
        for call in calls:
            link.ended_call()
            self._inbox.put(failed_result(call.request, f"node {link.node_id} was lost: {why}"))
        self._inbox.put(None)


def _channel(link: NodeLink) -> NodeChannel:
    if link.channel is None:
        raise ChannelLost(f"node {link.node_id} has no channel open")
    return link.channel


class _NoNode(Exception):
    """No node can take the request; the message says why."""


def _error(req_id: str, message: str) -> A2EError:
    return A2EError(req_id=req_id, code=ErrorCode.INTERNAL, message=message, retryable=True)


def failed_result(
    request: ToolCallRequest, why: str, reason: FailureReason = FailureReason.NODE_LOST
) -> ToolCallResponse:
    """``request``'s answer when it could not run to its end on a node: a failed call."""
    return ToolCallResponse(
        req_id=request.id,
        data=ToolResult(
            success=False,
            tool_name=request.tool_name,
            error=why,
            error_code=ToolErrorCode.TOOL_ERROR,
            reason=reason,
            duration_ms=0,
        ),
    )
