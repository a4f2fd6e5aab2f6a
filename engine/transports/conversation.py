"""``Conversation``: a session with the host, for transports whose peer does not speak A2E
itself (an HTTP request, an MCP session). It goes through the host protocol like every
transport: a connection, a handshake (a session of its own, with a fresh workspace), then
requests, each call's events and its answer, and at the end the connection is closed, which
ends the session and cancels what still runs.

Several calls may be in flight at once: what the host sends is routed to the request it
answers, by ``req_id``. It runs on the host's loop, where ``send`` is called.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator

from a2e.caps.tools.models import (
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolEvent,
    ToolListRequest,
    ToolListResponse,
)
from a2e.messages import A2EError, A2EMessage, ErrorCode, HandshakeRequest, HandshakeResponse
from a2e_engine.engine.host import Host, HostClosed

__all__ = ["Conversation", "Refused"]


class Refused(Exception):
    """The host answered with a protocol ``error`` (overloaded, too large, ...)."""

    def __init__(self, error: A2EError) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


class Conversation:
    def __init__(
        self, host: Host, watch: Callable[[A2EMessage], None], name: str, client: str = ""
    ) -> None:
        self._waiting: dict[str, asyncio.Queue[A2EMessage]] = {}
        self._watch = watch
        self._client = client or name
        self.session_id = ""
        try:
            self._connection = host.open_connection(self._arrive, name=name)
        except HostClosed as exc:
            raise Refused(
                A2EError(code=ErrorCode.OVERLOADED, message=str(exc), retryable=True)
            ) from None

    def _arrive(self, message: A2EMessage) -> None:  # on the host's loop: ours
        self._watch(message)
        waiting = self._waiting.get(getattr(message, "req_id", ""))
        if waiting is not None:
            waiting.put_nowait(message)
        # Anything else answers what nobody waits for (a cancel that came too late): dropped.

    async def _ask(self, message: A2EMessage) -> A2EMessage:
        with self._routed(message.id) as replies:
            self._connection.receive(message)
            while True:
                reply = await replies.get()
                if type(reply) is not ToolEvent:
                    return reply

    @contextlib.contextmanager
    def _routed(self, req_id: str) -> Iterator[asyncio.Queue[A2EMessage]]:
        replies: asyncio.Queue[A2EMessage] = asyncio.Queue()
        self._waiting[req_id] = replies
        try:
            yield replies
        finally:
            del self._waiting[req_id]

    async def open(self) -> None:
        reply = await self._ask(HandshakeRequest(client=self._client, capabilities=["tools"]))
        if isinstance(reply, A2EError):
            raise Refused(reply)
        assert isinstance(reply, HandshakeResponse)
        self.session_id = reply.session_id

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
        request = request.model_copy(update={"session_id": self.session_id})
        with self._routed(request.id) as replies:
            self._connection.receive(request)
            while True:
                batch: list[ToolEvent | ToolCallResponse] = []
                message: A2EMessage | None = await replies.get()
                while message is not None:
                    if isinstance(message, A2EError):
                        raise Refused(message)
                    if isinstance(message, ToolEvent | ToolCallResponse):
                        batch.append(message)
                        if isinstance(message, ToolCallResponse):
                            yield batch
                            return
                    message = replies.get_nowait() if not replies.empty() else None
                if batch:
                    yield batch

    def cancel(self, req_id: str) -> None:
        """End the call ``req_id`` as its timeout would: its worker is killed, and its answer
        (a cancelled result) still comes to whoever waits for it."""
        with contextlib.suppress(HostClosed):
            self._connection.receive(ToolCancelRequest(session_id=self.session_id, req_id=req_id))

    def close(self) -> None:
        """End the connection: calls still running are cancelled, the session ends."""
        with contextlib.suppress(HostClosed):
            self._connection.close()
