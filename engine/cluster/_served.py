"""``ServedSession``: a session a node opened for a driver (``NodeEngine.open_session``, or a
copy ``NodeEngine.fork`` made), served on a relay connection as a host connection would be.

The driver's frames for it are requests of that one session (``tool/call``, ``tool/cancel``,
``tool/list``): no handshake, since the session was opened with what a handshake cannot say (a
tenant, ``lasting``, ``home``). Each call's events go back as they come, then its response, as
on any connection. It is ``transports._conversation.RemoteSession`` turned around: that one
speaks to a connection as a host session, this one lets a host session be spoken to as a
connection. Everything here runs on the engine's loop, where the relay calls it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Coroutine
from typing import Any

from a2e._codec import ProtocolError
from a2e._messages import A2EError, A2EMessage, ErrorCode
from a2e.caps.tools._models import (
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolEvent,
    ToolListRequest,
)
from a2e_engine.engine._host import HostSession, Refused, Send

__all__ = ["ServedSession"]

log = logging.getLogger("a2e.cluster")


class ServedSession:
    """Implements ``engine._host.HostConnection`` over one ``HostSession``; ``receive``,
    ``finish`` and ``close`` are called on the engine's loop (the relay's)."""

    def __init__(self, session: HostSession, send: Send) -> None:
        self.session = session
        self._send = send
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def receive(self, message: A2EMessage | ProtocolError) -> None:
        if self.closed:
            return
        if isinstance(message, ProtocolError):
            self._send(message.to_message())
        elif isinstance(message, ToolCallRequest):
            if message.session_id and message.session_id != self.session.session_id:
                self._error(message.id, ErrorCode.UNKNOWN_SESSION, "not this connection's session")
                return
            self._start(self._call(message))
        elif isinstance(message, ToolCancelRequest):
            if not self.session.cancel(message.req_id):
                self._error(
                    message.id,
                    ErrorCode.UNKNOWN_REQUEST,
                    f"no call {message.req_id!r} in flight in this session",
                )
        elif isinstance(message, ToolListRequest):
            self._start(self._list(message))
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
        if not self.closed:
            self.closed = True
            self.session.close()

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, request: ToolCallRequest) -> None:
        try:
            async for burst in self.session.call(request):
                for item in burst:
                    if isinstance(item, ToolEvent):
                        self._send(item)
                    else:
                        self._send(ToolCallResponse(req_id=request.id, data=item))
        except Refused as exc:
            self._send(exc.error.model_copy(update={"req_id": request.id}))
        except Exception as exc:  # the engine's own bug: logged, and still answered
            log.exception("call %s of a served session failed", request.id)
            self._error(request.id, ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}")

    async def _list(self, request: ToolListRequest) -> None:
        try:
            self._send(await self.session.list_tools(request))
        except Refused as exc:
            self._send(exc.error.model_copy(update={"req_id": request.id}))

    def _error(self, req_id: str, code: ErrorCode, message: str) -> None:
        self._send(A2EError(req_id=req_id, code=code, message=message))
