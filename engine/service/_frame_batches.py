"""``BatchingWebSocketProtocol``: uvicorn's WebSocket protocol, able to send several messages
(each its own frame, as the protocol wants) in one write to the socket.

A streaming call's events reach the service in bursts (what a worker wrote between two reads of
its pipe). Sent one ASGI message at a time, each frame is a ``send`` system call and, on TCP
with no delay, a packet and a wake-up of the client: on loopback that costs more than making
the frame. This protocol offers the ASGI extension ``SEND_MANY`` in the scope; a message
``{"type": "websocket.send", "text": first, SEND_MANY: [texts...]}`` sends every text of the
list as its own text frame, with one write. Without the extension (another server), the app
sends one message at a time.
"""

from __future__ import annotations

import struct
from typing import Any

from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.exceptions import InvalidState
from websockets.protocol import State

from a2e_engine.engine.service._connections import Connections, TrackedTransport

__all__ = ["SEND_MANY", "BatchingWebSocketProtocol", "text_frame", "tracked_websockets"]

SEND_MANY = "a2e.websocket.send_many"


class BatchingWebSocketProtocol(TrackedTransport, WebSocketsSansIOProtocol):
    #: The service's connections (``engine.service._connections``), where it keeps one.
    ledger: Connections | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if self.ledger is not None:
            if not self.ledger.opened(self):
                transport.abort()
                return
            self.ledger.became_working(self)  # its endpoint judges when it idles

    def connection_lost(self, exc: Exception | None) -> None:
        if self.ledger is not None:
            self.ledger.closed(self)
        super().connection_lost(exc)

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        # The app's task is created, not yet run: it sees the extension.
        self.scope["extensions"][SEND_MANY] = {}  # type: ignore[index]

    async def send(self, message: Any) -> None:
        texts = message.get(SEND_MANY) if message["type"] == "websocket.send" else None
        if texts is None or not self.handshake_complete or self.close_sent:
            await super().send(message)
            return
        await self.writable.wait()
        if self.disconnected:
            raise ClientDisconnected()
        conn = self.conn
        if conn.state is not State.OPEN or conn.extensions:
            try:
                for text in texts:
                    conn.send_text(text.encode())
            except InvalidState:
                raise ClientDisconnected() from None
            self.transport.write(b"".join(conn.data_to_send()))
            return
        # What the protocol queued (a pong) goes first; the texts are framed here.
        out = conn.data_to_send()
        out.extend(text_frame(text.encode()) for text in texts)
        self.transport.write(b"".join(out))


def tracked_websockets(ledger: Connections) -> type[BatchingWebSocketProtocol]:
    """The WebSocket protocol class to give uvicorn (``ws=``), each connection in ``ledger``."""
    return type("TrackedWebSocketProtocol", (BatchingWebSocketProtocol,), {"ledger": ledger})


def text_frame(payload: bytes) -> bytes:
    """A whole, unmasked text frame (the only kind a server sends with no extension), framed
    without ``websockets``' general serializer, which costs more than the write it feeds."""
    size = len(payload)
    if size < 126:
        return bytes((0x81, size)) + payload
    if size < 1 << 16:
        return struct.pack("!BBH", 0x81, 126, size) + payload
    return struct.pack("!BBQ", 0x81, 127, size) + payload
