"""Client-side transports for ``A2EClient`` (and, awaited, for ``AsyncToolAPI``)."""

from a2e.transports.stdio import StdioTransport
from a2e.transports.websocket import TransportRefused, WebSocketTransport
from a2e.transports.websocket_async import AsyncWebSocketTransport

__all__ = ["AsyncWebSocketTransport", "StdioTransport", "TransportRefused", "WebSocketTransport"]
