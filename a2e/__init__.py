"""The A2E protocol: wire models, plugin contracts and the clients. Depends on pydantic, and
on websockets for the WebSocket transports.

Each name is imported when first used (``a2e._lazy``): a sandbox worker imports ``a2e._jsonwire``
and the plugin contract, and must not pay for the models and clients (pydantic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e._capability import A2ECapability
    from a2e._client import A2EClient, HandshakeFailed
    from a2e._codec import ProtocolError, decode, encode
    from a2e._messages import (
        PROTOCOL_VERSION,
        A2EError,
        A2EMessage,
        ErrorCode,
        HandshakeRequest,
        HandshakeResponse,
    )
    from a2e._transport import ClientTransport, TransportClosed

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
        "PROTOCOL_VERSION": "a2e._messages",
        "A2ECapability": "a2e._capability",
        "A2EClient": "a2e._client",
        "A2EError": "a2e._messages",
        "A2EMessage": "a2e._messages",
        "ClientTransport": "a2e._transport",
        "ErrorCode": "a2e._messages",
        "HandshakeFailed": "a2e._client",
        "HandshakeRequest": "a2e._messages",
        "HandshakeResponse": "a2e._messages",
        "ProtocolError": "a2e._codec",
        "TransportClosed": "a2e._transport",
        "decode": "a2e._codec",
        "encode": "a2e._codec",
    },
)
