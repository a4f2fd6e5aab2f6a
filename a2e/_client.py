"""``A2EClient``: one connection, one session, many requests in flight from many threads.

A single reader thread takes messages off the transport and routes them by ``req_id``: replies
complete the request that is waiting for them, ``tool/event`` messages go to the ``on_event``
callback of the call they belong to, in order. Callbacks run on the reader thread, so a slow
callback delays later messages of this connection but never the engine.

Where the transport offers it (in-process), a reply whose request has no event still waiting
for its callback completes the request at once, on the thread that produced it: one thread
wake-up and hand-over of the GIL fewer per call. Order is kept: a reply behind an undelivered
event of its request goes through the reader, after the event.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from a2e._messages import A2EError, A2EMessage, HandshakeRequest, HandshakeResponse
from a2e._requests import Requests
from a2e._transport import ClientTransport, TransportClosed
from a2e.caps.tools._models import ToolEvent

__all__ = ["REPLY_TIMEOUT_S", "A2EClient", "HandshakeFailed", "PendingReply"]

log = logging.getLogger("a2e.client")

#: How long a client waits for the server's answer to a handshake or a listing.
REPLY_TIMEOUT_S = 30.0


class HandshakeFailed(ConnectionError):
    """The host refused the handshake (bad token, nothing granted) or did not answer."""


class PendingReply:
    """The future reply to one request, plus the events received for it so far."""

    def __init__(self, req_id: str, on_event: Callable[[ToolEvent], None] | None) -> None:
        self.req_id = req_id
        self.on_event = on_event
        self.events: list[ToolEvent] = []
        # Held until the reply comes: a bare lock, because a threading.Event (a Condition and
        # its locks) is made on every call and costs several times more.
        self._waiting = threading.Lock()
        self._waiting.acquire()
        self._resolved = False
        self._reply: A2EMessage | None = None
        self._closed_reason = ""
        self._queued_events = 0  # counted at arrival by a direct route, until delivered

    def _deliver_event(self, event: ToolEvent) -> None:
        self.events.append(event)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:
                log.exception("on_event callback for %s raised; event dropped", self.req_id)

    def _resolve(self, reply: A2EMessage | None, reason: str = "") -> None:
        if self._resolved:
            return  # the first answer stands (a reply racing the connection's end)
        self._reply = reply
        self._closed_reason = reason
        self._resolved = True
        with contextlib.suppress(RuntimeError):  # two resolvers raced past the check
            self._waiting.release()

    def wait(self, timeout: float | None = None) -> A2EMessage | None:
        """The reply, or ``None`` on timeout or when the connection closed (see ``closed``)."""
        if self._waiting.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            self._waiting.release()  # for any other waiter, and for the next wait()
        return self._reply

    @property
    def done(self) -> bool:
        return self._resolved

    @property
    def closed_reason(self) -> str:
        return self._closed_reason


class A2EClient:
    """Connection-level client: handshake, request/reply matching, event routing."""

    def __init__(
        self,
        transport: ClientTransport,
        *,
        client_name: str = "a2e-python",
        capabilities: Sequence[str] = ("tools",),
        token: str | None = None,
        handshake: bool = True,
        handshake_timeout: float = REPLY_TIMEOUT_S,
    ) -> None:
        self.transport = transport
        self.client_name = client_name
        self.session_id = ""
        self.capabilities: list[str] = []
        self.server = ""
        self._tools_cache: dict[Any, Any] = {}
        self._requests: Requests[PendingReply] = Requests()
        self._lock = threading.Lock()  # held around every use of the requests
        self._closed = False
        self._closed_reason = "client closed"
        route_directly = getattr(transport, "route_directly", None)
        if callable(route_directly):
            route_directly(self._route_on_arrival)
        self._reader = threading.Thread(
            target=self._read_loop, name="a2e-client-reader", daemon=True
        )
        self._reader.start()
        if handshake:
            self.handshake(list(capabilities), token=token, timeout=handshake_timeout)

    # -- lifecycle --

    def handshake(
        self, capabilities: list[str], token: str | None = None, timeout: float = REPLY_TIMEOUT_S
    ) -> HandshakeResponse:
        request = HandshakeRequest(client=self.client_name, capabilities=capabilities, token=token)
        reply = self.request(request, timeout=timeout)
        if isinstance(reply, A2EError):
            raise HandshakeFailed(f"handshake refused: {reply.code}: {reply.message}")
        if not isinstance(reply, HandshakeResponse):
            raise HandshakeFailed(f"no handshake reply within {timeout} s")
        self.session_id = reply.session_id
        self.capabilities = list(reply.capabilities)
        self.server = reply.server
        return reply

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.transport.close()
        self._reader.join(timeout=5)
        self._fail_all("client closed")

    def __enter__(self) -> A2EClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- requests --

    def start(
        self, message: A2EMessage, on_event: Callable[[ToolEvent], None] | None = None
    ) -> PendingReply:
        """Send ``message`` and return the pending reply without waiting for it."""
        pending = PendingReply(message.id, on_event)
        with self._lock:
            if self._closed:
                pending._resolve(None, self._closed_reason)
                return pending
            self._requests.add(message.id, pending)
        try:
            self.transport.send(message)
        except TransportClosed as exc:
            self._forget(message.id)
            pending._resolve(None, f"connection closed: {exc}")
        return pending

    def request(self, message: A2EMessage, timeout: float | None = None) -> A2EMessage | None:
        """Send and wait for the reply; ``None`` if none came in time or the connection closed."""
        pending = self.start(message)
        reply = pending.wait(timeout)
        self._forget(message.id)
        return reply

    def send(self, message: A2EMessage) -> None:
        """Fire and forget (e.g. a cancel). An ``error`` the host may still answer it with (a
        cancel that arrived after its call ended) is expected, and not reported as a stray."""
        with self._lock:
            self._requests.sent_without_waiting(message.id)
        self.transport.send(message)

    def _forget(self, req_id: str) -> None:
        with self._lock:
            self._requests.forget(req_id)

    # -- the reader --

    def _read_loop(self) -> None:
        reason = "connection closed by the host"
        try:
            while True:
                message = self.transport.receive()
                if message is None:
                    why = getattr(self.transport, "close_reason", "")
                    reason = f"{reason}: {why}" if why else reason
                    break
                self._dispatch(message)
        except Exception as exc:  # a broken transport must not leave callers waiting forever
            log.exception("client reader stopped")
            reason = f"connection failed: {exc}"
        with self._lock:
            self._closed = True  # later requests fail at once instead of waiting for nothing
            self._closed_reason = reason
        self._fail_all(reason)

    def _route_on_arrival(self, message: A2EMessage) -> bool:
        """The transport's direct route (``a2e._transport.DirectRoute``), on its thread."""
        req_id = getattr(message, "req_id", "")
        if not req_id:
            return False
        with self._lock:
            pending = self._requests.get(req_id)
            if pending is None:
                return False  # the reader logs or drops it
            if isinstance(message, ToolEvent):
                pending._queued_events += 1
                return False
            if pending._queued_events:
                return False  # its events first: the reader resolves it after them
            self._requests.forget(req_id)
        pending._resolve(message)
        return True

    def _dispatch(self, message: A2EMessage) -> None:
        with self._lock:
            routed = self._requests.route(message)
        if routed is None:
            return
        pending, last = routed
        if not last:
            assert isinstance(message, ToolEvent)
            pending._deliver_event(message)
            if pending._queued_events:
                with self._lock:
                    pending._queued_events -= 1
        else:
            pending._resolve(message)

    def _fail_all(self, reason: str) -> None:
        with self._lock:
            pendings = self._requests.drain()
        for pending in pendings:
            pending._resolve(None, reason)
