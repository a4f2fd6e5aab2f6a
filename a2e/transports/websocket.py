"""Drive a host over WebSocket: ``ToolAPI(A2EClient(WebSocketTransport(url, token=T)))`` works
exactly as in-process, against ``a2e serve --http`` anywhere on the network.

One JSON message per text frame. The token goes in the upgrade's ``Authorization: Bearer``
header; a server that refuses the upgrade (401, 503) raises ``TransportRefused`` with its reason.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
from collections.abc import Iterator
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from a2e import jsonwire
from a2e.codec import MAX_MESSAGE_BYTES, ProtocolError, decode, encode
from a2e.messages import A2EMessage
from a2e.transport import TransportClosed

__all__ = [
    "TransportRefused",
    "WebSocketTransport",
    "connect_options",
    "refusal",
    "refused_as",
]

log = logging.getLogger("a2e.transports.websocket")


class TransportRefused(ConnectionError):
    """The server would not open the connection (its status and reason in the message)."""


class WebSocketTransport:
    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        open_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        max_message_bytes: int = 2 * MAX_MESSAGE_BYTES,
    ) -> None:
        options = connect_options(token, open_timeout, ssl_context, max_message_bytes)
        with refused_as(url):
            # Entered at once: the connection lives as long as the transport (close() ends it).
            self._ws: ClientConnection = connect(url, **options).__enter__()
        self._lock = threading.Lock()
        self._closed = False

    def send(self, message: A2EMessage) -> None:
        self.send_raw(encode(message))

    def send_raw(self, data: str | bytes) -> None:
        """Send one frame as it is: text for a ``str``, binary for ``bytes`` (tests use it)."""
        with self._lock:
            if self._closed:
                raise TransportClosed("websocket transport is closed")
            try:
                self._ws.send(data)
            except (ConnectionClosed, OSError) as exc:
                raise TransportClosed(f"the connection is closed: {exc}") from exc

    def receive(self) -> A2EMessage | None:
        while True:
            try:
                frame = self._ws.recv()
            except (ConnectionClosed, OSError, EOFError):
                return None
            try:
                return decode(frame)
            except ProtocolError as exc:
                log.warning("ignoring a frame from the host that is not a message: %s", exc)

    @property
    def close_reason(self) -> str:
        """Why the server closed the connection (``code reason``), once it did."""
        code = self._ws.close_code
        return f"{code} {self._ws.close_reason or ''}".strip() if code is not None else ""

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._ws.close()


def connect_options(
    token: str | None,
    open_timeout: float,
    ssl_context: ssl.SSLContext | None,
    max_message_bytes: int,
) -> dict[str, Any]:
    """What both clients of ``websockets`` (sync and asyncio) are opened with: the token as a
    bearer header, no compression (CPU per message, for JSON that is mostly small)."""
    return {
        "additional_headers": {"Authorization": f"Bearer {token}"} if token is not None else None,
        "open_timeout": open_timeout,
        "max_size": max_message_bytes,
        "compression": None,
        "ssl": ssl_context,
    }


@contextlib.contextmanager
def refused_as(url: str) -> Iterator[None]:
    """A failed upgrade or connection as ``TransportRefused``, with the server's reason."""
    try:
        yield
    except InvalidStatus as exc:
        raise TransportRefused(refusal(exc)) from None
    except (InvalidHandshake, OSError, TimeoutError) as exc:
        raise TransportRefused(f"cannot connect to {url}: {exc}") from None


def refusal(exc: InvalidStatus) -> str:
    """Why the server refused the upgrade: its status and the reason its body gives."""
    response = exc.response
    why = response.reason_phrase
    try:
        body = jsonwire.loads(response.body or b"")
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            why = f"{body.get('error', why)}: {body['message']}"
    except ValueError:
        pass
    return f"the server refused the connection: {response.status_code} {why}"
