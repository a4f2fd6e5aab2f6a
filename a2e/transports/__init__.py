"""Client-side transports for ``A2EClient`` (and, awaited, for ``AsyncToolAPI``); each imported
when first named, so that the stdio transport does not bring in the websockets library."""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e.transports._stdio import StdioTransport
    from a2e.transports._websocket import TransportRefused, WebSocketTransport
    from a2e.transports._websocket_async import AsyncWebSocketTransport

__all__ = ["AsyncWebSocketTransport", "StdioTransport", "TransportRefused", "WebSocketTransport"]

__getattr__ = lazy_exports(
    __name__,
    {
        "AsyncWebSocketTransport": "a2e.transports._websocket_async",
        "StdioTransport": "a2e.transports._stdio",
        "TransportRefused": "a2e.transports._websocket",
        "WebSocketTransport": "a2e.transports._websocket",
    },
)
