"""The A2E protocol: wire models, plugin contracts and the clients. Depends on pydantic, and
on websockets for the WebSocket transports.

Each name is imported when first used (``a2e.lazy``): a sandbox worker imports ``a2e.jsonwire``
and the plugin contract, and must not pay for the models and clients (pydantic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e.lazy import lazy_exports

if TYPE_CHECKING:
    from a2e.capability import A2ECapability
    from a2e.client import A2EClient, HandshakeFailed
    from a2e.codec import ProtocolError, decode, encode
    from a2e.messages import (
        PROTOCOL_VERSION,
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

__getattr__ = lazy_exports(
    __name__,
    {
        "PROTOCOL_VERSION": "a2e.messages",
        "A2ECapability": "a2e.capability",
        "A2EClient": "a2e.client",
        "A2EError": "a2e.messages",
        "A2EMessage": "a2e.messages",
        "ClientTransport": "a2e.transport",
        "ErrorCode": "a2e.messages",
        "HandshakeFailed": "a2e.client",
        "HandshakeRequest": "a2e.messages",
        "HandshakeResponse": "a2e.messages",
        "ProtocolError": "a2e.codec",
        "TransportClosed": "a2e.transport",
        "decode": "a2e.codec",
        "encode": "a2e.codec",
    },
)
