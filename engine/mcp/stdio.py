"""``a2e serve --mcp``: the engine's tools over MCP's stdio transport.

The process is one MCP session, and so one engine session (one workspace, one uid), opened
with the first request and ended when the client closes stdin. The SDK's server runs on the
engine's own loop, so that a call's events reach the client without a hop between threads.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, Self

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from a2e_engine.engine.host import Host
from a2e_engine.engine.mcp.server import build_server
from a2e_engine.engine.transports.conversation import Conversation
from a2e_engine.engine.version import engine_version

__all__ = ["serve_mcp_stdio"]


class _OneSession:
    """The process's engine session, opened once, on first use."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._opened: asyncio.Task[Conversation] | None = None

    async def conversation(self, ctx: ServerRequestContext[Any]) -> Conversation:
        if self._opened is None:
            self._opened = asyncio.ensure_future(self._open())
        return await asyncio.shield(self._opened)

    async def _open(self) -> Conversation:
        conversation = Conversation(self._host, lambda message: None, "mcp stdio", "mcp")
        try:
            await conversation.open()
        except BaseException:
            conversation.close()
            raise
        return conversation

    def close(self) -> None:
        opened = self._opened
        if opened is None or not opened.done() or opened.cancelled() or opened.exception():
            return
        opened.result().close()


class _Reading(Protocol):
    async def receive(self) -> SessionMessage | Exception: ...
    async def aclose(self) -> None: ...


class _Writing(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class _AnsweringUnreadable:
    """The stdin stream of messages, with each line that is not one answered at once: the
    SDK's stdio transport would drop it without a word, and the client wait for ever. Not JSON
    gets -32700 (parse error), JSON that is not a JSON-RPC message -32600 (invalid request);
    either way, the session goes on."""

    def __init__(
        self,
        read: _Reading,
        write: _Writing,
    ) -> None:
        self._read = read
        self._write = write

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._read.receive()
            if not isinstance(item, Exception):
                return item
            await self._write.send(SessionMessage(_unreadable(item)))

    async def aclose(self) -> None:
        await self._read.aclose()

    def __aiter__(self) -> _AnsweringUnreadable:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _unreadable(problem: Exception) -> types.JSONRPCError:
    errors = problem.errors() if isinstance(problem, ValidationError) else []
    if errors and errors[0]["type"] == "json_invalid":
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"parse error: {errors[0]['msg']}")
    else:
        error = types.ErrorData(
            code=types.INVALID_REQUEST, message="invalid request: not a JSON-RPC 2.0 message"
        )
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)


async def serve_mcp_stdio(host: Host, call_timeout_s: float = 30) -> None:
    """Serve until the client closes stdin (on the host's loop)."""
    session = _OneSession(host)
    server = build_server(session.conversation, engine_version(), call_timeout_s)
    try:
        async with stdio_server() as (read, write):
            messages = _AnsweringUnreadable(read, write)
            await server.run(messages, write, server.create_initialization_options())
    finally:
        session.close()
