"""The A2E protocol: wire models, plugin contracts and the clients. Depends on pydantic, and
on websockets for the WebSocket transports.

Each name is imported when first used, not with the package: a sandbox worker imports
``a2e.jsonwire`` and the plugin contract, and must not pay for the models and clients (pydantic)
on every fork and exit.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

#: Each public name by the module that defines it.
_HOMES = {
    "PROTOCOL_VERSION": "messages",
    "A2ECapability": "capability",
    "A2EClient": "client",
    "A2EError": "messages",
    "A2EMessage": "messages",
    "ClientTransport": "transport",
    "ErrorCode": "messages",
    "HandshakeFailed": "client",
    "HandshakeRequest": "messages",
    "HandshakeResponse": "messages",
    "ProtocolError": "codec",
    "TransportClosed": "transport",
    "decode": "codec",
    "encode": "codec",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
