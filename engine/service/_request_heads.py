"""``bounded_heads``: uvicorn's HTTP/1.1 protocol (on ``httptools``), with a deadline and a size
limit for each request's line and headers.

uvicorn times out a connection only while it is idle between requests, and any byte resets
that; a client that trickles its headers (or sends nothing after connecting) would hold its
connection, and one of ``max_connections``, for ever. Here every connection has
``request_timeout_s`` from its start, and from the end of each response, to send a whole
request head; past it the connection is closed. ``httptools`` sets no limit on a head's size
and uvicorn keeps what it parsed, so a head past ``MAX_HEAD_BYTES`` gets 431 and the
connection is closed. The body has its own limits (``engine.service._bodies``); a WebSocket,
once upgraded, is no longer watched here.

Each connection is also in the service's ledger (``engine.service._connections``): refused at
once past its address's share, idle while it waits for a head (and closable for a newer one),
working while a request on it is answered.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from a2e import _jsonwire as jsonwire
from a2e_engine.engine.service._connections import Connections, TrackedTransport

__all__ = ["MAX_HEAD_BYTES", "bounded_heads"]

#: A request line and its headers, at most (a token, cookies and a long URL fit well within).
MAX_HEAD_BYTES = 64 * 1024


class _BoundedHeads(TrackedTransport, HttpToolsProtocol):
    head_timeout_s: float  # the service's request_timeout_s (``bounded_heads``)
    ledger: Connections  # the service's (``bounded_heads``)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._upgraded = False

    def _arm(self) -> None:
        self._disarm()
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _waiting_for_a_head(self) -> bool:
        return not self._upgraded and (self.cycle is None or self.cycle.response_complete)

    def _too_slow(self) -> None:
        self._head_timer = None
        if self._waiting_for_a_head() and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.ledger.opened(self):
            transport.abort()  # its address holds its share: not read at all
            return
        self._arm()

    def on_headers_complete(self) -> None:
        self.ledger.became_working(self)
        super().on_headers_complete()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._waiting_for_a_head():
            self._disarm()
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self._disarm()
            self._refuse_head()

    def _refuse_head(self) -> None:
        body = jsonwire.dumps(
            {
                "error": "head_too_large",
                "message": f"the request line and headers exceed {MAX_HEAD_BYTES} bytes",
            }
        ).encode()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()
            self.ledger.became_idle(self)

    def handle_websocket_upgrade(self) -> None:
        self._upgraded = True
        self._disarm()
        self.ledger.closed(self)  # the WebSocket protocol takes the connection over, and counts it
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.ledger.closed(self)
        super().connection_lost(exc)


def bounded_heads(seconds: float, ledger: Connections) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn (``http=``): heads within ``seconds`` and
    ``MAX_HEAD_BYTES``, each connection in ``ledger``."""
    return type(
        "BoundedHeadsProtocol", (_BoundedHeads,), {"head_timeout_s": seconds, "ledger": ledger}
    )
