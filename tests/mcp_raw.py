"""What an MCP client sends first, written by hand: for the tests that speak to the server
without the SDK's client (a line or a body the client would never send)."""

from __future__ import annotations

from typing import Any

__all__ = ["INITIALIZE"]

#: A handshake-era ``initialize`` request, id 1.
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
