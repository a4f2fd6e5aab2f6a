"""The A2E protocol over WebSocket (``/a2e``): one JSON message per text frame, exactly the
messages and errors of stdio, many calls in flight per connection.

Like every transport it knows only the host protocol (``engine._host``): one WebSocket is one
connection. It runs on the host's loop (``engine.service._server``), where ``send`` is called,
so a reply goes from the engine to the socket without a hop between threads. A frame that is
not a message gets an ``error`` reply and the connection goes on; a message over the limit gets
``message_too_large`` (twice the limit and the server closes with 1009 before reading it). A
client that stops reading is dropped once ``max_outbox_bytes`` wait for it; a client that goes
away has its calls cancelled, their workers killed, its sessions ended. One with no call in
flight that sends and is sent nothing for ``websocket_idle_s`` is closed (1000, "idle"): an
idle connection must not hold what working clients need (``engine.service._connections``).
What waits to be sent goes out in one write where the server allows it
(``engine.service._frame_batches``), each message still its own frame.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable

from starlette.websockets import WebSocket, WebSocketDisconnect

from a2e._codec import ProtocolError, decode, encode
from a2e._messages import A2EError, A2EMessage, ErrorCode
from a2e.caps.tools._models import ToolCallRequest, ToolCallResponse
from a2e_engine.engine._host import Host, HostClosed
from a2e_engine.engine.service._auth import tenant_of
from a2e_engine.engine.service._config import ServiceConfig
from a2e_engine.engine.service._frame_batches import SEND_MANY

__all__ = ["Watch", "serve_websocket"]

#: Sees each message a transport sends (the service counts results and refusals with it).
Watch = Callable[[A2EMessage], None]

log = logging.getLogger("a2e.service")

#: Close codes (RFC 6455): policy violation, and the server going away.
CLOSE_POLICY = 1008
CLOSE_GOING_AWAY = 1001
#: How long the close of a dropped client may wait for it to read.
CLOSE_WAIT_S = 5.0


class _Outbox:
    """Messages for one client, in order, and how many bytes wait: a bound on what a client
    that does not read can make the server hold."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.texts: collections.deque[str] = collections.deque()
        self.waiting = 0
        self.wake = asyncio.Event()
        self.overflowed = False

    def put(self, text: str) -> None:
        if self.overflowed:
            return
        self.waiting += len(text)
        if self.waiting > self.limit:
            self.overflowed = True  # the writer closes the connection
            self.texts.clear()
        else:
            self.texts.append(text)
        self.wake.set()


async def serve_websocket(
    host: Host,
    websocket: WebSocket,
    config: ServiceConfig,
    watch: Watch,
    draining: Callable[[], bool],
) -> None:
    """Serve one WebSocket until the client closes it, the server stops, or the client is
    dropped; its calls end with it. ``watch`` sees each message that goes out (metrics);
    while ``draining()``, new calls are refused (``overloaded``) and those running go on."""
    await websocket.accept()
    outbox = _Outbox(config.max_outbox_bytes)
    idleness = _Idleness(config.websocket_idle_s)

    def send(message: A2EMessage) -> None:  # on the host's loop: this one
        watch(message)
        idleness.sent(message)
        outbox.put(encode(message))

    peer = f"{websocket.client.host}:{websocket.client.port}" if websocket.client else "?"
    try:
        connection = host.open_connection(
            send, name=f"ws {peer}", tenant=tenant_of(websocket.scope)
        )
    except HostClosed:
        await websocket.close(CLOSE_GOING_AWAY, "the engine is stopping")
        return

    def receive(message: A2EMessage | ProtocolError) -> None:
        idleness.received(message)
        if type(message) is ToolCallRequest and draining():
            send(
                A2EError(
                    req_id=message.id,
                    code=ErrorCode.OVERLOADED,
                    message="the service is shutting down; call another instance",
                    retryable=True,
                )
            )
            return
        connection.receive(message)

    writer = asyncio.create_task(_write(websocket, outbox))
    reader = asyncio.create_task(_read(websocket, receive, config.max_message_bytes))
    watchdog = asyncio.create_task(idleness.until_idle())
    try:
        await asyncio.wait((reader, writer, watchdog), return_when=asyncio.FIRST_COMPLETED)
    finally:
        with contextlib.suppress(HostClosed):
            connection.close()
        for task in (reader, writer, watchdog):
            task.cancel()
        await asyncio.gather(reader, writer, watchdog, return_exceptions=True)
    if watchdog.done() and not watchdog.cancelled():
        log.info("closed %s: idle for %g s", peer, config.websocket_idle_s)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(websocket.close(1000, "idle"), CLOSE_WAIT_S)
    if outbox.overflowed:
        log.warning("dropped %s: it left more than %d bytes unread", peer, outbox.limit)
        # The close frame waits behind what the client does not read: not for ever.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                websocket.close(CLOSE_POLICY, "too much unread: read your messages"), CLOSE_WAIT_S
            )


class _Idleness:
    """When a connection last sent or was sent a message, and which of its calls are in
    flight (a client waiting for a long call is not idle)."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.last = time.monotonic()
        self.calls: set[str] = set()

    def received(self, message: A2EMessage | ProtocolError) -> None:
        self.last = time.monotonic()
        if type(message) is ToolCallRequest:
            self.calls.add(message.id)

    def sent(self, message: A2EMessage) -> None:
        self.last = time.monotonic()
        if type(message) in (ToolCallResponse, A2EError):
            self.calls.discard(message.req_id)  # type: ignore[attr-defined]

    async def until_idle(self) -> None:
        """Returns once the connection has been idle for ``limit_s``."""
        while True:
            left = self.last + self.limit_s - time.monotonic()
            if left <= 0 and not self.calls:
                return
            await asyncio.sleep(max(left, self.limit_s / 4, 0.01))


async def _read(
    websocket: WebSocket, receive: Callable[[A2EMessage | ProtocolError], None], limit: int
) -> None:
    while True:
        try:
            frame = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if frame["type"] == "websocket.disconnect":
            return
        text = frame.get("text")
        message: A2EMessage | ProtocolError
        if text is None:
            message = ProtocolError(
                ErrorCode.INVALID_MESSAGE, "binary frames carry no messages; send text frames"
            )
        elif len(text) > limit:
            message = ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"message of {len(text)} characters exceeds the limit of {limit}; skipped",
            )
        else:
            try:
                message = decode(text)
            except ProtocolError as exc:
                message = exc
        receive(message)


async def _write(websocket: WebSocket, outbox: _Outbox) -> None:
    while True:
        await outbox.wake.wait()
        outbox.wake.clear()
        if outbox.overflowed:
            return
        batching = SEND_MANY in websocket.scope.get("extensions", {})
        while outbox.texts:
            if batching:
                texts = list(outbox.texts)
                outbox.texts.clear()
                message = {"type": "websocket.send", "text": texts[0], SEND_MANY: texts}
            else:
                texts = [outbox.texts.popleft()]
                message = {"type": "websocket.send", "text": texts[0]}
            outbox.waiting -= sum(len(text) for text in texts)
            try:
                await websocket.send(message)
            except (WebSocketDisconnect, RuntimeError, OSError):
                return
