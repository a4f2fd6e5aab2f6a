"""``BatchingWebSocketProtocol``: uvicorn's WebSocket protocol, able to send several messages
(each its own frame, as the protocol wants) in one write to the socket.

A streaming call's events reach the service in bursts (what a worker wrote between two reads of
its pipe). Sent one ASGI message at a time, each frame is a ``send`` system call and, on TCP
with no delay, a packet and a wake-up of the client: on loopback that costs more than making
the frame. This protocol offers the ASGI extension ``SEND_MANY`` in the scope; a message
``{"type": "websocket.send", "text": first, SEND_MANY: [texts...]}`` sends every text of the
list as its own text frame, with one write. Without the extension (another server), the app
sends one message at a time, as before.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.exceptions import InvalidState

__all__ = ["SEND_MANY", "BatchingWebSocketProtocol"]

SEND_MANY = "a2e.websocket.send_many"


class BatchingWebSocketProtocol(WebSocketsSansIOProtocol):
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
        try:
            for text in texts:
                self.conn.send_text(text.encode())
        except InvalidState:
            raise ClientDisconnected() from None
        self.transport.write(b"".join(self.conn.data_to_send()))
