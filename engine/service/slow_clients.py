"""``with_header_deadline``: uvicorn's HTTP/1.1 protocol, with a deadline for each request's
line and headers.

uvicorn times out a connection only while it is idle between requests, and any byte resets
that; a client that trickles its headers (or sends nothing after connecting) would hold its
connection, and one of ``max_connections``, for ever. Here every connection has
``request_timeout_s`` from its start, and from the end of each response, to send a whole
request head; past it the connection is closed. The body has its own deadline
(``engine.service.bodies``); a WebSocket, once upgraded, is no longer timed here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["with_header_deadline"]


class _HeaderDeadline(H11Protocol):
    header_timeout_s = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _waiting_for_a_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _too_slow(self) -> None:
        self._head_timer = None
        if self._waiting_for_a_head() and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._waiting_for_a_head():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def handle_websocket_upgrade(self, event: Any) -> None:
        self._disarm()
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def with_header_deadline(seconds: float) -> type[H11Protocol]:
    """The protocol class to give uvicorn (``http=``)."""
    return type("HeaderDeadlineH11Protocol", (_HeaderDeadline,), {"header_timeout_s": seconds})
