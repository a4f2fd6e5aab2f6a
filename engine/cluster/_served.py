"""``ServedSession``: a session a node opened for a driver (``NodeEngine.open_session``, or a
copy ``NodeEngine.fork`` made), served on a relay connection as a host connection would be.

The driver's frames for it are requests of that one session (``tool/call``, ``tool/cancel``,
``tool/list``): no handshake, since the session was opened with what a handshake cannot say (a
tenant, ``lasting``, ``home``). A call is admitted and registered as its frame arrives, as a
connection's is (``engine._connection``), so that a cancel right behind it finds it; its events
go back as they come, then its response. When the engine ends the session itself (memory
running short), the driver is told at once, in an ``error`` that answers no request: its
sandbox ends there too, saying why. Everything here runs on the engine's loop, where the relay
calls it.
"""

from __future__ import annotations

import concurrent.futures

from a2e._codec import ProtocolError
from a2e._messages import A2EError, A2EMessage, ErrorCode
from a2e.caps.tools._models import ToolCallRequest, ToolCancelRequest, ToolListRequest
from a2e_engine.engine._host import Refused, Send
from a2e_engine.engine._host_session import LocalSession, response_to

__all__ = ["ServedSession"]


class ServedSession:
    """Implements ``engine._host.HostConnection`` over one ``LocalSession``; ``receive``,
    ``finish`` and ``close`` are called on the engine's loop (the relay's)."""

    def __init__(self, session: LocalSession, send: Send) -> None:
        self.session = session
        self._send = send
        session.on_evicted.append(self._evicted)

    def receive(self, message: A2EMessage | ProtocolError) -> None:
        if isinstance(message, ProtocolError):
            self._send(message.to_message())
        elif isinstance(message, ToolCallRequest):
            self._call(message)
        elif isinstance(message, ToolCancelRequest):
            if not self.session.cancel(message.req_id):
                self._error(
                    message.id,
                    ErrorCode.UNKNOWN_REQUEST,
                    f"no call {message.req_id!r} in flight in this session",
                )
        elif isinstance(message, ToolListRequest):
            try:
                self._send(self.session.tools(message))
            except Refused as exc:
                self._send(exc.error)
        else:
            self._error(
                message.id,
                ErrorCode.INVALID_MESSAGE,
                f"{message.type} is not taken by a session opened through its node",
            )

    def finish(self) -> concurrent.futures.Future[None]:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        self.close()
        return done

    def close(self) -> None:
        """End the session: its calls are cancelled, their results still sent (idempotent)."""
        self.session.close()

    def _call(self, request: ToolCallRequest) -> None:
        if request.session_id and request.session_id != self.session.session_id:
            self._error(request.id, ErrorCode.UNKNOWN_SESSION, "not this connection's session")
            return
        try:
            task = self.session.start(request, self._send)
        except Refused as exc:
            self._send(exc.error)
            return
        task.add_done_callback(lambda done: self._send(response_to(request, done)))

    def _evicted(self, why: str) -> None:
        self._error("", ErrorCode.UNKNOWN_SESSION, f"the session has ended: {why}")

    def _error(self, req_id: str, code: ErrorCode, message: str) -> None:
        self._send(A2EError(req_id=req_id, code=code, message=message))
