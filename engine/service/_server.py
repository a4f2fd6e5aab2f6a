"""``HttpService``: the service on uvicorn, on the host's own event loop, and its shutdown.

On the host's loop, so that a reply goes from the engine to its socket without a hop between
threads (the host calls ``send`` there). The listening socket is bound here, before uvicorn
starts, so that a taken port or a bad address is an error with its reason (``ServiceError``)
rather than uvicorn's exit, and port 0 gives the port it got.

Shutdown (``drain``): stop accepting, refuse new requests (503) on connections kept alive, let
the calls in flight finish for up to ``drain_s``, then close every connection, which cancels
what is left and kills its workers. The engine then ends the sessions (``Engine.stop``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

import uvicorn

from a2e_engine.engine._host import Host
from a2e_engine.engine._version import engine_version
from a2e_engine.engine.e2b._control import E2BEndpoint
from a2e_engine.engine.mcp._http import McpEndpoint
from a2e_engine.engine.service._app import build_app
from a2e_engine.engine.service._config import ServiceConfig
from a2e_engine.engine.service._frame_batches import tracked_websockets
from a2e_engine.engine.service._request_heads import bounded_heads
from a2e_engine.engine.service._state import ServiceState

__all__ = ["HttpService", "ServiceError"]

log = logging.getLogger("a2e.service")

#: How often the drain looks whether the calls in flight have ended.
DRAIN_POLL_S = 0.05
#: After the drain, how long uvicorn may take to close what is still open.
CLOSE_S = 5


class ServiceError(Exception):
    """The service cannot start: its address, or its TLS files (the message says which)."""


class HttpService:
    def __init__(self, host: Host, config: ServiceConfig) -> None:
        self.host = host
        self.config = config
        self.state = ServiceState(host, config)
        self._server: uvicorn.Server | None = None
        self._socket: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None
        self.mcp = McpEndpoint(host, config.mcp_call_timeout_s, config.max_message_bytes)
        self.e2b = E2BEndpoint(host, config.sandboxes_per_client)

    @property
    def url(self) -> str:
        """``http(s)://host:port`` as bound (the port port 0 got)."""
        assert self._socket is not None
        host, port = self._socket.getsockname()[:2]
        scheme = "https" if self.config.tls_cert else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"

    async def start(self) -> None:
        """Bind and start serving; on the host's loop. ``ServiceError`` if it cannot."""
        config = self.config
        self._socket = _bind(config.host, config.port)
        server_config = uvicorn.Config(
            build_app(self.state, self.mcp, self.e2b, engine_version()),
            http=bounded_heads(config.request_timeout_s, self.state.connections),
            ws=tracked_websockets(self.state.connections),
            ws_max_size=2 * config.max_message_bytes,
            ws_per_message_deflate=False,  # CPU per message, and a way to inflate memory
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            proxy_headers=False,
            limit_concurrency=self.state.connections.server_limit,
            timeout_graceful_shutdown=CLOSE_S,
            ssl_certfile=config.tls_cert,
            ssl_keyfile=config.tls_key,
        )
        try:
            server_config.load()
        except (OSError, ssl.SSLError) as exc:
            self._socket.close()
            raise ServiceError(f"cannot use the TLS certificate or key: {exc}") from None
        self._server = uvicorn.Server(server_config)
        await self.mcp.start()
        self._task = asyncio.get_running_loop().create_task(self._serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise ServiceError("the server stopped while starting")
            await asyncio.sleep(0.01)

    async def _serve(self) -> None:
        assert self._server is not None and self._socket is not None
        try:
            await self._server.serve([self._socket])
        finally:
            await self.mcp.stop()
            await self.e2b.stop()

    async def drain(self, grace_s: float | None = None) -> None:
        """Stop: no new connections or requests, the calls in flight finish within ``grace_s``
        (``drain_s``), then every connection closes, ending what is left."""
        server, task = self._server, self._task
        if server is None or task is None:
            return
        self.state.draining = True
        for listener in server.servers:
            listener.close()
        loop = asyncio.get_running_loop()
        until = loop.time() + (self.config.drain_s if grace_s is None else grace_s)
        while self.host.status().calls_pending and loop.time() < until:
            await asyncio.sleep(DRAIN_POLL_S)
        left = self.host.status().calls_pending
        if left:
            log.warning("drain over: cancelling %d calls still running", left)
        # MCP sessions hold event streams open (a client's GET) that would keep uvicorn
        # waiting until it cancels them with a traceback: ended first, they close.
        await self.mcp.stop()
        await self.e2b.stop()  # its sandboxes' sessions end with the service
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)

    async def wait(self) -> None:
        """Until the server has stopped (after ``drain``)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ServiceError(f"cannot resolve {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ServiceError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(False)
    return sock
