"""``a2e serve --mcp``: the engine's tools over MCP's stdio transport.

The process is one MCP session, and so one engine session (one workspace, one uid), opened
with the first request and ended when the client closes stdin. The SDK's server runs on the
engine's own loop, so that a call's events reach the client without a hop between threads.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

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


async def serve_mcp_stdio(host: Host) -> None:
    """Serve until the client closes stdin (on the host's loop)."""
    session = _OneSession(host)
    server = build_server(session.conversation, engine_version())
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        session.close()
