"""Client-side transports for ``A2EClient``."""

from a2e.transports.stdio import StdioTransport
from a2e.transports.websocket import TransportRefused, WebSocketTransport

__all__ = ["StdioTransport", "TransportRefused", "WebSocketTransport"]
