"""``/mcp``: the engine's tools over MCP's Streamable HTTP transport, in the service's app.

The SDK's session manager serves the transport; its task group runs on the engine's loop,
where uvicorn serves (``start``, ``stop``). The token, the drain and the limits on request
heads are the service's, as for every other path.

An MCP session (its ``Mcp-Session-Id``) is one engine session, opened with its first request
and ended when the client deletes the session, when it has been idle for ``idle_s`` (as the
SDK ends it), or when the service stops. A request of the 2026-07-28 protocol carries no
session: it gets an engine session of its own, ended with it, as a REST request does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from a2e.caps.tools._models import DEFAULT_TIMEOUT_S
from a2e_engine.engine._host import Host, HostSession
from a2e_engine.engine._version import engine_version
from a2e_engine.engine.mcp._server import build_server
from a2e_engine.engine.mcp._sessions import LazySession

__all__ = ["McpEndpoint"]

SESSION_HEADER = "mcp-session-id"
#: How often sessions are looked at for idleness.
SWEEP_S = 30.0


class McpEndpoint:
    def __init__(
        self,
        host: Host,
        call_timeout_s: float = DEFAULT_TIMEOUT_S,
        max_body_bytes: int = 4 * 1024 * 1024,
        idle_s: float = 1800,
    ) -> None:
        self._host = host
        self._idle_s = idle_s
        self._sessions: dict[str, LazySession] = {}
        server = build_server(self._session, engine_version(), call_timeout_s)
        self._manager = StreamableHTTPSessionManager(
            app=server, session_idle_timeout=idle_s, max_request_body_size=max_body_bytes
        )
        self._stopping = asyncio.Event()
        self._running: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """On the loop uvicorn serves from, before it serves."""
        started = asyncio.get_running_loop().create_future()
        self._running = asyncio.ensure_future(self._run(started))
        await started
        self._sweeper = asyncio.ensure_future(self._sweep())

    async def _run(self, started: asyncio.Future[None]) -> None:
        """The manager's whole life in one task: its task group (anyio's cancel scope) must
        be left by the task that entered it."""
        try:
            async with self._manager.run():
                started.set_result(None)
                await self._stopping.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    async def stop(self) -> None:
        """End every MCP session (their event streams close) and the manager; once."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        self._stopping.set()
        if self._running is not None:
            await asyncio.gather(self._running, return_exceptions=True)
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._manager.handle_request(scope, receive, send)
        if scope["method"] == "DELETE":
            ended = Headers(scope=scope).get(SESSION_HEADER)
            session = self._sessions.pop(ended, None) if ended else None
            if session is not None:
                session.close()

    @contextlib.asynccontextmanager
    async def _session(self, ctx: ServerRequestContext[Any]) -> AsyncIterator[HostSession]:
        request = ctx.request
        session_id: str | None = request.headers.get(SESSION_HEADER) if request else None
        if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            session_id = None  # the 2026 protocol has no sessions: the header proves nothing
        if not session_id:
            alone = LazySession(self._host, "mcp http", stateless=True)
            try:
                yield await alone.get()
            finally:
                alone.close()
            return
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = LazySession(self._host, "mcp http")
        yield await session.get()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(min(SWEEP_S, self._idle_s))
            now = time.monotonic()
            for session_id, session in list(self._sessions.items()):
                if now - session.last_used > self._idle_s:
                    del self._sessions[session_id]
                    session.close()
