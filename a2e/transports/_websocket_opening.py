"""Opening a WebSocket to ``a2e serve --http``, and what a refusal says.

The sync transport opens its own socket and runs the upgrade on ``websockets``' sans-I/O
``ClientProtocol``, so that afterwards one thread of ours reads frames straight off the socket.
Both transports (sync and asyncio) send the token the same way and turn a refused upgrade into
the same ``TransportRefused``, with the status and the reason the server's body gives.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI
from websockets.frames import Frame
from websockets.http11 import Response
from websockets.protocol import SEND_EOF
from websockets.uri import parse_uri

from a2e import _jsonwire as jsonwire

__all__ = [
    "RECEIVE_BYTES",
    "TransportRefused",
    "connect_options",
    "open_websocket",
    "refusal",
    "refused_as",
    "write_all",
]

#: How much one ``recv`` asks for: a burst of events in one read, whatever their number.
RECEIVE_BYTES = 256 * 1024


class TransportRefused(ConnectionError):
    """The server would not open the connection (its status and reason in the message)."""


def open_websocket(
    url: str,
    *,
    token: str | None,
    open_timeout: float,
    ssl_context: ssl.SSLContext | None,
    max_message_bytes: int,
) -> tuple[socket.socket, ClientProtocol, list[Frame]]:
    """A connected, upgraded socket; its protocol state; frames that came with the upgrade's
    answer. The whole opening (TCP, TLS, upgrade) is bounded by ``open_timeout``.

    Proxy variables (``HTTPS_PROXY``…) are not consulted: the service is reached directly.
    """
    try:
        uri = parse_uri(url)
    except InvalidURI as exc:
        raise ValueError(f"not a ws:// or wss:// URL: {exc}") from None
    deadline = time.monotonic() + open_timeout
    sock = socket.create_connection((uri.host, uri.port), timeout=open_timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        if uri.secure:
            context = ssl_context if ssl_context is not None else ssl.create_default_context()
            sock.settimeout(_left(deadline))
            sock = context.wrap_socket(sock, server_hostname=uri.host)
        protocol = ClientProtocol(uri, max_size=max_message_bytes)
        request = protocol.connect()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        protocol.send_request(request)
        write_all(sock, protocol.data_to_send())
        while True:
            sock.settimeout(_left(deadline))
            data = sock.recv(RECEIVE_BYTES)
            if data:
                protocol.receive_data(data)
            else:
                protocol.receive_eof()
            events = protocol.events_received()
            if protocol.handshake_exc is not None:
                raise protocol.handshake_exc
            if events and isinstance(events[0], Response):
                # Frames may have come with the answer, and the protocol may owe them a reply.
                write_all(sock, protocol.data_to_send())
                sock.settimeout(None)
                return sock, protocol, [event for event in events[1:] if isinstance(event, Frame)]
            if not data:
                raise ConnectionError("the server closed the connection during the upgrade")
    except BaseException:
        sock.close()
        raise


def write_all(sock: socket.socket, chunks: list[bytes]) -> None:
    """Write what the protocol has to send, in one ``sendall`` where it can; ``SEND_EOF`` (the
    protocol's "half-close now") shuts the write side."""
    data = b"".join(chunks)
    if data:
        sock.sendall(data)
    if SEND_EOF in chunks:
        sock.shutdown(socket.SHUT_WR)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out opening the connection")
    return left


def connect_options(
    token: str | None,
    open_timeout: float,
    ssl_context: ssl.SSLContext | None,
    max_message_bytes: int,
) -> dict[str, Any]:
    """What the asyncio client of ``websockets`` is opened with: the token as a bearer header,
    no compression (CPU per message, for JSON that is mostly small)."""
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
