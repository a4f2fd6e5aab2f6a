"""``ServiceConfig``: what shapes the network service, apart from the engine behind it.

Every limit has a safe default: a service faces clients it does not know. The engine's own
limits (calls per connection, pending calls, timeouts) stay in ``EngineConfig``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from a2e._codec import MAX_MESSAGE_BYTES
from a2e.caps.tools._models import DEFAULT_TIMEOUT_S

__all__ = ["ServiceConfig", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the service on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServiceConfig:
    """``token``: when set, every endpoint but ``/healthz`` wants it (``Authorization: Bearer``,
    or ``?token=`` for clients that can only be given a URL). ``max_message_bytes`` caps a
    WebSocket message and a request body; ``max_outbox_bytes`` is what a connection may have
    waiting to be sent before a client that does not read is dropped. ``drain_s``: on SIGTERM,
    how long calls in flight may take to finish before they are cancelled. ``max_connections``
    bounds the connections served at once (past it: 503); apart from them, at most
    ``max_idle_connections`` wait for a request (one more and the one idle longest is closed),
    a client address holds at most ``max_connections_per_address`` (0: a derived default, both),
    and a WebSocket with no call in flight and no message for ``websocket_idle_s`` is closed
    (``engine.service._connections``)."""

    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_outbox_bytes: int = 64 * 1024 * 1024
    drain_s: float = 30.0
    max_connections: int = 1024
    #: Keys besides ``token``, one per client: each is a tenant of its own (the service's
    #: shares of memory are judged per tenant; without keys, per client address).
    api_keys: tuple[str, ...] = ()
    max_idle_connections: int = 0
    max_connections_per_address: int = 0
    websocket_idle_s: float = 300.0
    #: What the bodies of the requests in flight may hold together once read (0: sixteen
    #: times ``max_message_bytes``), each at most four times ``max_message_bytes``
    #: (``engine.service._body_budget``).
    max_bodies_bytes: int = 0
    #: How long a client may take to send its request line and headers, or a body.
    request_timeout_s: float = 30.0
    #: Each MCP call's timeout (``/mcp``), as MCP requests carry none.
    mcp_call_timeout_s: float = DEFAULT_TIMEOUT_S
    #: E2B sandboxes (``engine.e2b``) one client (API key, or address) may hold live at once:
    #: each holds a session of the engine, and its uid, for as long as it lives.
    sandboxes_per_client: int = 256

    def __post_init__(self) -> None:
        if self.token is not None and not self.token:
            raise ValueError("the service's token is empty; give one, or none (--no-auth)")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both a certificate and its key (--tls-cert, --tls-key)")
        if self.max_message_bytes < 1024 or self.max_outbox_bytes < self.max_message_bytes:
            raise ValueError(
                "max_message_bytes must be at least 1024 and max_outbox_bytes at least as large"
            )
        if self.drain_s < 0 or self.max_connections < 1 or self.request_timeout_s <= 0:
            raise ValueError("drain_s must be >= 0, max_connections >= 1, request_timeout_s > 0")
        if not self.mcp_call_timeout_s > 0:
            raise ValueError("mcp_call_timeout_s must be a positive number of seconds")
        if any(not key or key.strip() != key for key in self.api_keys):
            raise ValueError("an API key is empty, or begins or ends with a space")
        if len(set(self.api_keys)) != len(self.api_keys) or self.token in self.api_keys:
            raise ValueError("the API keys must differ from each other and from the token")
        if self.max_bodies_bytes < 0:
            raise ValueError("max_bodies_bytes must be >= 0")
        if self.max_idle_connections < 0 or self.max_connections_per_address < 0:
            raise ValueError("max_idle_connections and max_connections_per_address must be >= 0")
        if not self.websocket_idle_s > 0:
            raise ValueError("websocket_idle_s must be a positive number of seconds")
        if self.sandboxes_per_client < 1:
            raise ValueError("sandboxes_per_client must be at least 1")

    @property
    def bodies_bytes(self) -> int:
        return self.max_bodies_bytes or 16 * self.max_message_bytes

    @property
    def body_charge_bytes(self) -> int:
        """What one request's body may cost once read."""
        return min(4 * self.max_message_bytes, self.bodies_bytes)

    @property
    def idle_connections(self) -> int:
        """How many connections may wait for a request at once."""
        return self.max_idle_connections or max(8, min(256, self.max_connections // 4))

    @property
    def connections_per_address(self) -> int:
        """How many connections one client address may hold."""
        return self.max_connections_per_address or max(2, min(64, self.max_connections // 4))
