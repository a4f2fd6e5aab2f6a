"""The A2E protocol: wire models, plugin contracts and the clients. Depends on pydantic, and
on websockets for the WebSocket transports."""

from a2e.client import A2EClient, HandshakeFailed
from a2e.codec import ProtocolError, decode, encode
from a2e.messages import (
    PROTOCOL_VERSION,
    A2ECapability,
    A2EError,
    A2EMessage,
    ErrorCode,
    HandshakeRequest,
    HandshakeResponse,
)
from a2e.transport import ClientTransport, TransportClosed

__all__ = [
    "PROTOCOL_VERSION",
    "A2ECapability",
    "A2EClient",
    "A2EError",
    "A2EMessage",
    "ClientTransport",
    "ErrorCode",
    "HandshakeFailed",
    "HandshakeRequest",
    "HandshakeResponse",
    "ProtocolError",
    "TransportClosed",
    "decode",
    "encode",
]
