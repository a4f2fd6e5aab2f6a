"""``AsyncToolAPI``: the tools capability for asyncio hosts, on their own loop.

    async with await AsyncToolAPI.connect("ws://127.0.0.1:8080/a2e", token=T) as tools:
        result = await tools.call("python_eval", {"code": "print(1)"})

The same calls as ``ToolAPI`` (``list``, ``start``, ``call``, ``cancel``), awaited; one reader
task routes replies and events by request id through the table the threaded client uses too
(``a2e._requests``), so many calls run at once on one connection.
``call`` returns a ``ToolResult`` in every case, as ``ToolAPI`` does. Over any transport with
awaitable ``send``, ``receive`` and ``close`` (``AsyncWebSocketTransport``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from a2e._client import REPLY_TIMEOUT_S, HandshakeFailed
from a2e._messages import A2EError, A2EMessage, HandshakeRequest, HandshakeResponse
from a2e._requests import Requests
from a2e._transport import TransportClosed
from a2e.caps.tools._client import (
    REPLY_GRACE_S,
    call_request,
    list_request,
    listed_tools,
    to_result,
)
from a2e.caps.tools._models import (
    DEFAULT_TIMEOUT_S,
    ToolCallRequest,
    ToolCancelRequest,
    ToolDefinition,
    ToolEvent,
    ToolResult,
)

__all__ = ["AsyncClientTransport", "AsyncPendingCall", "AsyncToolAPI"]

log = logging.getLogger("a2e.client")

EventCallback = Callable[[ToolEvent], Awaitable[None] | None]


class AsyncClientTransport(Protocol):
    async def send(self, message: A2EMessage) -> None: ...

    async def receive(self) -> A2EMessage | None: ...

    async def close(self) -> None: ...


class AsyncPendingCall:
    """A call in flight: ``await result()``, or ``await cancel()``."""

    def __init__(
        self, api: AsyncToolAPI, request: ToolCallRequest, on_event: EventCallback | None
    ) -> None:
        self._api = api
        self.request = request
        self.on_event = on_event
        self.events: list[ToolEvent] = []
        self._reply: asyncio.Future[A2EMessage | None] = asyncio.get_running_loop().create_future()
        self._started = time.monotonic()

    @property
    def req_id(self) -> str:
        return self.request.id

    async def cancel(self) -> None:
        await self._api.cancel(self.req_id)

    async def result(self, timeout: float | None = None) -> ToolResult:
        """The result. With no ``timeout``, waits the call's own timeout plus a grace, then
        cancels it and says so; with one, ``TimeoutError`` past it and the call goes on."""
        wait = self.request.timeout + REPLY_GRACE_S if timeout is None else timeout
        try:
            reply = await asyncio.wait_for(asyncio.shield(self._reply), wait)
        except TimeoutError:
            if timeout is not None:
                raise
            await self.cancel()
            self._api._requests.forget(self.req_id)
            return to_result(self.request, None, self.events, self._started, closed=None)
        closed = self._api.closed_reason if reply is None else None
        return to_result(self.request, reply, self.events, self._started, closed=closed)

    async def _deliver(self, event: ToolEvent) -> None:
        self.events.append(event)
        if self.on_event is None:
            return
        try:
            returned = self.on_event(event)
            if returned is not None:
                await returned
        except Exception:
            log.exception("on_event callback for %s raised; event dropped", self.req_id)


class AsyncToolAPI:
    def __init__(self, transport: AsyncClientTransport) -> None:
        self.transport = transport
        self.session_id = ""
        self.closed_reason = ""
        self._requests: Requests[AsyncPendingCall | asyncio.Future[A2EMessage | None]] = Requests()
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        token: str | None = None,
        client_name: str = "a2e-python-async",
        capabilities: Sequence[str] = ("tools",),
        **options: Any,
    ) -> AsyncToolAPI:
        """Open a WebSocket to ``a2e serve --http`` and do the handshake."""
        from a2e.transports._websocket_async import AsyncWebSocketTransport

        transport = await AsyncWebSocketTransport.connect(url, token=token, **options)
        api = cls(transport)
        try:
            await api.handshake(list(capabilities), client_name=client_name)
        except BaseException:
            await api.close()
            raise
        return api

    async def __aenter__(self) -> AsyncToolAPI:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _request(self, message: A2EMessage, timeout: float) -> A2EMessage | None:
        reply: asyncio.Future[A2EMessage | None] = asyncio.get_running_loop().create_future()
        self._requests.add(message.id, reply)
        try:
            await self.transport.send(message)
            return await asyncio.wait_for(reply, timeout)
        except (TimeoutError, TransportClosed):
            return None
        finally:
            self._requests.forget(message.id)

    async def handshake(
        self, capabilities: list[str], client_name: str = "", token: str | None = None
    ) -> HandshakeResponse:
        hello = HandshakeRequest(client=client_name, capabilities=capabilities, token=token)
        reply = await self._request(hello, REPLY_TIMEOUT_S)
        if isinstance(reply, A2EError):
            raise HandshakeFailed(f"handshake refused: {reply.code}: {reply.message}")
        if not isinstance(reply, HandshakeResponse):
            raise HandshakeFailed(
                f"no handshake reply ({self.closed_reason or f'in {REPLY_TIMEOUT_S:g} s'})"
            )
        self.session_id = reply.session_id
        return reply

    async def list(
        self,
        query: str = "",
        include_deferred: bool = False,
        tags: Sequence[str] | None = None,
        kind: str = "",
    ) -> list[ToolDefinition]:
        request = list_request(query, include_deferred, tags, kind)
        return listed_tools(await self._request(request, REPLY_TIMEOUT_S))

    async def start(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        streaming: bool = False,
        on_event: EventCallback | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        correlation_id: str | None = None,
    ) -> AsyncPendingCall:
        request = call_request(
            self.session_id, tool_name, arguments, streaming, timeout, correlation_id
        )
        pending = AsyncPendingCall(self, request, on_event)
        self._requests.add(request.id, pending)
        try:
            await self.transport.send(request)
        except TransportClosed as exc:
            self._requests.forget(request.id)
            self.closed_reason = self.closed_reason or f"connection closed: {exc}"
            pending._reply.set_result(None)
        return pending

    async def call(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        streaming: bool = False,
        on_event: EventCallback | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        correlation_id: str | None = None,
    ) -> ToolResult:
        pending = await self.start(
            tool_name, arguments, streaming, on_event, timeout, correlation_id
        )
        return await pending.result()

    async def cancel(self, req_id: str) -> None:
        """Ask the host to cancel the call; its answer is the call's result (an ``error`` the
        host may send if the call had already ended is expected, and not reported)."""
        request = ToolCancelRequest(session_id=self.session_id, req_id=req_id)
        self._requests.sent_without_waiting(request.id)
        with contextlib.suppress(TransportClosed):
            await self.transport.send(request)

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        with contextlib.suppress(Exception):
            await self.transport.close()
        self._fail_all(self.closed_reason or "client closed")

    async def _read(self) -> None:
        reason = "connection closed by the host"
        try:
            while (message := await self.transport.receive()) is not None:
                await self._route(message)
        except asyncio.CancelledError:
            reason = "client closed"
            raise
        except Exception as exc:
            log.exception("async client reader stopped")
            reason = f"connection failed: {exc}"
        finally:
            self.closed_reason = self.closed_reason or reason
            self._fail_all(self.closed_reason)

    async def _route(self, message: A2EMessage) -> None:
        routed = self._requests.route(message)
        if routed is None:
            return
        waiting, last = routed
        if not last:
            if isinstance(waiting, AsyncPendingCall) and isinstance(message, ToolEvent):
                await waiting._deliver(message)
            return  # an event for a request that is not a call: nothing to give it to
        future = waiting._reply if isinstance(waiting, AsyncPendingCall) else waiting
        if not future.done():
            future.set_result(message)

    def _fail_all(self, reason: str) -> None:
        self.closed_reason = self.closed_reason or reason
        for waiting in self._requests.drain():
            future = waiting._reply if isinstance(waiting, AsyncPendingCall) else waiting
            if not future.done():
                future.set_result(None)
