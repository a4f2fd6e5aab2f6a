"""Drive a host over WebSocket: ``ToolAPI(A2EClient(WebSocketTransport(url, token=T)))`` works
exactly as in-process, against ``a2e serve --http`` anywhere on the network.

One JSON message per text frame. The token goes in the upgrade's ``Authorization: Bearer``
header; a server that refuses the upgrade (401, 503) raises ``TransportRefused`` with its reason.

Frames are read on the caller's thread (``A2EClient``'s reader), straight off the socket
(``websocket_inbound``, with ``websockets``' sans-I/O protocol for all but plain text frames):
a streaming call's burst of events is one ``recv`` and no hand-off between threads. So this
transport answers the server's pings itself, and sends its own when the line has been quiet for
``ping_interval``: a server that answers nothing for another interval is taken as gone, and
``receive`` ends.
"""

from __future__ import annotations

import collections
import logging
import socket
import ssl
import threading
import time

from websockets.frames import Close, CloseCode, Frame, Opcode
from websockets.protocol import State

from a2e._codec import MAX_MESSAGE_BYTES, ProtocolError, decode, encode
from a2e._messages import A2EMessage
from a2e._transport import TransportClosed
from a2e.transports._websocket_inbound import Inbound
from a2e.transports._websocket_opening import (
    RECEIVE_BYTES,
    TransportRefused,
    open_websocket,
    refused_as,
    write_all,
)

__all__ = ["TransportRefused", "WebSocketTransport"]

log = logging.getLogger("a2e.transports.websocket")

#: How long ``close`` waits for the server to answer its close frame and end the stream.
CLOSE_TIMEOUT_S = 2.0


class WebSocketTransport:
    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        open_timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
        max_message_bytes: int = 2 * MAX_MESSAGE_BYTES,
        ping_interval: float = 20.0,
    ) -> None:
        if not ping_interval > 0:
            raise ValueError(
                f"ping_interval must be a positive number of seconds, not {ping_interval}"
            )
        with refused_as(url):
            self._sock, self._protocol, early = open_websocket(
                url,
                token=token,
                open_timeout=open_timeout,
                ssl_context=ssl_context,
                max_message_bytes=max_message_bytes,
            )
        self._sock.settimeout(ping_interval)
        self._ping_interval = ping_interval
        #: Held for the protocol's state and every write, so frames leave whole and in order.
        self._lock = threading.Lock()
        #: Held by whoever reads the socket: ``receive``, or ``close`` waiting for the end.
        self._reading = threading.Lock()
        self._inbound = Inbound(self._protocol, max_message_bytes, early)
        #: Whole messages, and the frames the protocol parsed, in the order they came.
        self._frames: collections.deque[bytes | Frame] = collections.deque(early)
        self._fragments: list[bytes] = []
        self._ping_unanswered = False
        self._close_by: float | None = None
        self._ended = False
        self._closed = False
        self._lost = ""
        if self._protocol.close_expected():  # a close came with the upgrade's answer
            self._expect_close()

    def send(self, message: A2EMessage) -> None:
        self.send_raw(encode(message))

    def send_raw(self, data: str | bytes) -> None:
        """Send one frame as it is: text for a ``str``, binary for ``bytes`` (tests use it)."""
        with self._lock:
            if self._closed:
                raise TransportClosed("websocket transport is closed")
            if self._protocol.state is not State.OPEN:
                raise TransportClosed(f"the connection is closed: {self.close_reason}")
            if isinstance(data, str):
                self._protocol.send_text(data.encode())
            else:
                self._protocol.send_binary(data)
            self._write(raising=True)

    def receive(self) -> A2EMessage | None:
        with self._reading:
            while True:
                while self._frames:
                    item = self._frames.popleft()
                    data = item if isinstance(item, bytes) else self._message(item)
                    if data is None:
                        continue
                    try:
                        return decode(data)
                    except ProtocolError as exc:
                        log.warning("ignoring a frame from the host that is not a message: %s", exc)
                if self._ended:
                    return None
                self._read_once()

    @property
    def close_reason(self) -> str:
        """Why the connection ended, once it did: ``code reason`` of the server's close, or of
        ours when what it sent broke the protocol, or what the socket said."""
        received: Close | None = self._protocol.close_rcvd
        if received is not None:
            return f"{received.code} {received.reason}".strip()
        sent: Close | None = self._protocol.close_sent
        if sent is not None and self._protocol.parser_exc is not None:
            return f"{sent.code} {sent.reason}".strip()
        return self._lost

    def close(self) -> None:
        """Close as the protocol asks (a close frame, the server's answer, its end of the
        stream), within ``CLOSE_TIMEOUT_S``; then release the socket, ending any ``receive``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._protocol.state is State.OPEN:
                self._protocol.send_close(CloseCode.NORMAL_CLOSURE)
                self._write(raising=False)
            self._expect_close()
        if self._reading.acquire(timeout=CLOSE_TIMEOUT_S):
            try:
                while not self._ended:
                    self._read_once()
            finally:
                self._reading.release()
        self._shut("")
        self._sock.close()

    def _read_once(self) -> None:
        """One ``recv``, fed to the protocol: its frames queued, its answers (pongs, the close
        echo) written. A quiet line gets a ping, and a second quiet interval ends the stream;
        once a close is under way, the server has ``CLOSE_TIMEOUT_S`` to end it."""
        wait = self._ping_interval
        if self._close_by is not None:
            wait = self._close_by - time.monotonic()
            if wait <= 0:
                self._shut("the server did not end the connection after the close")
                self._ended = True
                return
        if wait != self._sock.gettimeout():
            self._sock.settimeout(wait)
        try:
            data = self._sock.recv(RECEIVE_BYTES)
        except TimeoutError:
            if self._close_by is None:
                self._keep_alive()
            return
        except OSError as exc:
            self._shut(f"the connection failed: {exc}")
            data = b""
        with self._lock:
            if data:
                self._ping_unanswered = False
                self._frames.extend(self._inbound.feed(data))
            else:
                self._frames.extend(self._inbound.end())
            self._write(raising=False)
            if self._protocol.close_expected():
                self._expect_close()
            if not data or self._protocol.state is State.CLOSED:
                self._ended = True
                self._lost = self._lost or "the server closed the connection"

    def _expect_close(self) -> None:
        if self._close_by is None:
            self._close_by = time.monotonic() + CLOSE_TIMEOUT_S

    def _keep_alive(self) -> None:
        with self._lock:
            if self._ping_unanswered:
                self._shut(f"no answer from the server for {2 * self._ping_interval:g} s")
                self._ended = True
                return
            if self._protocol.state is State.OPEN:
                self._ping_unanswered = True
                self._protocol.send_ping(b"")
                self._write(raising=False)

    def _message(self, frame: Frame) -> bytes | None:
        """A data frame's whole message once its last fragment is in; control frames are the
        protocol's business and give nothing."""
        if frame.opcode not in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
            return None
        data = bytes(frame.data)
        if not frame.fin:
            self._fragments.append(data)
            return None
        if not self._fragments:
            return data
        self._fragments.append(data)
        data, self._fragments = b"".join(self._fragments), []
        return data

    def _write(self, *, raising: bool) -> None:
        """Write what the protocol has queued (with ``_lock`` held). A failed write leaves the
        stream broken mid-frame, so the socket is shut: the reader sees the end."""
        try:
            write_all(self._sock, self._protocol.data_to_send())
        except OSError as exc:
            self._shut(f"the connection failed: {exc}")
            if raising:
                raise TransportClosed(f"the connection is closed: {exc}") from exc

    def _shut(self, why: str) -> None:
        self._lost = self._lost or why
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
