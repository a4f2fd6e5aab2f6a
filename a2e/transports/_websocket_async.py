"""The WebSocket transport for asyncio hosts: ``await AsyncWebSocketTransport.connect(url,
token=T)``, then ``send``, ``receive``, ``close``, all awaited on the host's own loop (no thread
of ours). ``AsyncToolAPI`` (``a2e.caps.tools._async_client``) speaks the protocol over it."""

from __future__ import annotations

import logging
import ssl

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from a2e._codec import MAX_MESSAGE_BYTES, ProtocolError, decode, encode
from a2e._messages import A2EMessage
from a2e._transport import TransportClosed
from a2e.transports._websocket_opening import connect_options, refused_as

__all__ = ["AsyncWebSocketTransport"]

log = logging.getLogger("a2e.transports.websocket")


class AsyncWebSocketTransport:
    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        token: str | None = None,
        open_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        max_message_bytes: int = 2 * MAX_MESSAGE_BYTES,
    ) -> AsyncWebSocketTransport:
        options = connect_options(token, open_timeout, ssl_context, max_message_bytes)
        with refused_as(url):
            ws = await connect(url, **options)
        return cls(ws)

    async def send(self, message: A2EMessage) -> None:
        try:
            await self._ws.send(encode(message))
        except (ConnectionClosed, OSError) as exc:
            raise TransportClosed(f"the connection is closed: {exc}") from exc

    async def receive(self) -> A2EMessage | None:
        while True:
            try:
                frame = await self._ws.recv()
            except (ConnectionClosed, OSError, EOFError):
                return None
            try:
                return decode(frame)
            except ProtocolError as exc:
                log.warning("ignoring a frame from the host that is not a message: %s", exc)

    async def close(self) -> None:
        await self._ws.close()
