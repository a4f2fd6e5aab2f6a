"""``Exchange``: one HTTP request's conversation with the host, through the host protocol like
every transport: a connection, a handshake (a session of its own: a fresh workspace, as
SandboxFusion gives each run), the request, its events and its answer, then the connection is
closed, which ends the session.

It runs on the host's loop (``engine.service.server``), where ``send`` is called. If the HTTP
client goes away first, ``close`` cancels the call and kills its worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from a2e.caps.tools.models import (
    ToolCallRequest,
    ToolCallResponse,
    ToolEvent,
    ToolListRequest,
    ToolListResponse,
)
from a2e.messages import A2EError, A2EMessage, HandshakeRequest, HandshakeResponse
from a2e_engine.engine.host import Host, HostClosed

__all__ = ["Exchange", "Refused"]


class Refused(Exception):
    """The host answered with a protocol ``error`` (overloaded, too large, ...)."""

    def __init__(self, error: A2EError) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


class Exchange:
    def __init__(self, host: Host, watch: Callable[[A2EMessage], None], name: str) -> None:
        self._inbox: asyncio.Queue[A2EMessage] = asyncio.Queue()
        self._watch = watch
        self._session = ""
        try:
            self._connection = host.open_connection(self._arrive, name=name)
        except HostClosed as exc:
            raise Refused(A2EError(code="overloaded", message=str(exc), retryable=True)) from None

    def _arrive(self, message: A2EMessage) -> None:  # on the host's loop: ours
        self._watch(message)
        self._inbox.put_nowait(message)

    async def _ask(self, message: A2EMessage) -> A2EMessage:
        self._connection.receive(message)
        while True:
            reply = await self._inbox.get()
            if getattr(reply, "req_id", None) == message.id and type(reply) is not ToolEvent:
                return reply

    async def open(self) -> None:
        reply = await self._ask(HandshakeRequest(client="http", capabilities=["tools"]))
        if isinstance(reply, A2EError):
            raise Refused(reply)
        assert isinstance(reply, HandshakeResponse)
        self._session = reply.session_id

    async def list_tools(self, request: ToolListRequest) -> ToolListResponse:
        reply = await self._ask(request)
        if isinstance(reply, A2EError):
            raise Refused(reply)
        assert isinstance(reply, ToolListResponse)
        return reply

    async def call(self, request: ToolCallRequest) -> AsyncIterator[ToolEvent | ToolCallResponse]:
        """The call's events as they come, then its response (``Refused`` for an error)."""
        async for batch in self.call_in_batches(request):
            for message in batch:
                yield message

    async def call_in_batches(
        self, request: ToolCallRequest
    ) -> AsyncIterator[list[ToolEvent | ToolCallResponse]]:
        """The same, in the batches they arrived in (a burst of a tool's events at once), so
        that a transport can write each burst with one write."""
        request = request.model_copy(update={"session_id": self._session})
        self._connection.receive(request)
        while True:
            batch: list[ToolEvent | ToolCallResponse] = []
            message: A2EMessage | None = await self._inbox.get()
            while message is not None:
                if getattr(message, "req_id", None) == request.id:
                    if isinstance(message, A2EError):
                        raise Refused(message)
                    if isinstance(message, ToolEvent | ToolCallResponse):
                        batch.append(message)
                        if isinstance(message, ToolCallResponse):
                            yield batch
                            return
                message = self._inbox.get_nowait() if not self._inbox.empty() else None
            if batch:
                yield batch

    def close(self) -> None:
        """End the connection: a call still running is cancelled, the session ends."""
        with contextlib.suppress(HostClosed):
            self._connection.close()
