"""``NodeChannel``: a driver's one connection to a node's relay, shared by all its clients.

Requests are written from the caller's thread (under a lock, so frames never interleave), or,
for a caller that must never block (an event loop: ``queued``), by a writer thread in the order
they were queued; one reader thread per channel decodes the replies and hands each to the
request waiting for it, in the order the node sent them, until that request's last reply
(anything but an event). When the channel fails (the actor died, the node went away, the node
sent what no node of ours sends), every request waiting on it is told why, once, and so is
``on_lost``: the node is given up. Nothing that comes back is unpickled: frames carry protocol
JSON.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from a2e import _codec as codec
from a2e._messages import A2EMessage
from a2e.caps.tools._models import ToolEvent
from a2e_engine.engine.cluster._frames import HEADER, FrameError, pack, unpack_header

__all__ = ["ChannelBusy", "ChannelLost", "Deliver", "Lost", "NodeChannel"]

log = logging.getLogger("a2e.cluster")

#: How long reaching a node's relay may take.
CONNECT_TIMEOUT_S = 30.0
#: What queued frames may hold, waiting for the writer, before more are refused: a node that
#: reads slowly must not fill the driver's memory with its clients' requests.
MAX_QUEUED_BYTES = 64 << 20

Deliver = Callable[[A2EMessage], None]
#: Why the channel failed: the request's node is lost.
Lost = Callable[[str], None]


class ChannelLost(ConnectionError):
    """The channel to the node failed; the message says why."""


class ChannelBusy(Exception):
    """Past ``MAX_QUEUED_BYTES`` waiting to be written: the request was not sent."""


@dataclass(frozen=True)
class _Waiter:
    deliver: Deliver
    lost: Lost


class NodeChannel:
    def __init__(self, node_id: str, address: tuple[str, int], token: bytes, on_lost: Lost) -> None:
        self.node_id = node_id
        self.address = address
        self._token = token
        self._on_lost = on_lost
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._waiting: dict[tuple[str, str], _Waiter] = {}
        self._closing = False
        self._outbox: queue.SimpleQueue[bytes | None] | None = None  # for queued requests
        self._queued_bytes = 0
        self._watching: dict[str, Deliver] = {}  # connection id -> who hears its notices
        self.lost = ""  # why it failed, once it did

    def open(self) -> NodeChannel:
        sock = socket.create_connection(self.address, timeout=CONNECT_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        sock.sendall(self._token)
        self._sock = sock
        threading.Thread(
            target=self._read, args=(sock.makefile("rb"),), name="a2e-ray-channel", daemon=True
        ).start()
        return self

    def request(
        self,
        conn_id: str,
        req_id: str,
        line: str,
        deliver: Deliver,
        lost: Lost,
        queued: bool = False,
    ) -> None:
        """Send ``line`` (request ``req_id`` of connection ``conn_id``); its replies go to
        ``deliver``, or why the node was lost to ``lost``. ``queued``: written by the
        channel's writer thread, after what was queued before it; the caller never waits
        (``ChannelBusy`` past ``MAX_QUEUED_BYTES``)."""
        with self._lock:
            why = self.lost
            if not why:
                self._waiting[(conn_id, req_id)] = _Waiter(deliver, lost)
        if why:
            lost(why)
            return
        try:
            self._send(pack(conn_id, line), queued)
        except ChannelBusy:
            with self._lock:
                self._waiting.pop((conn_id, req_id), None)
            raise

    def watch(self, conn_id: str, notice: Deliver) -> None:
        """``notice`` hears what the node says on ``conn_id`` that answers no request (its
        session ended there: ``served``), until ``unwatch``."""
        with self._lock:
            self._watching[conn_id] = notice

    def unwatch(self, conn_id: str) -> None:
        with self._lock:
            self._watching.pop(conn_id, None)

    def post(self, conn_id: str, line: str, queued: bool = False) -> None:
        """Send ``line`` and wait for nothing (a cancel: the call it names replies; an empty
        line: the connection bound to this channel, ``frames``)."""
        if not self.lost:
            self._send(pack(conn_id, line), queued)

    def ask(self, conn_id: str, request: A2EMessage, timeout: float) -> list[A2EMessage]:
        """Send ``request`` and wait for all its replies; ``ChannelLost``, ``TimeoutError``."""
        done = threading.Event()
        replies: list[A2EMessage] = []
        failures: list[str] = []

        def deliver(reply: A2EMessage) -> None:
            replies.append(reply)
            if type(reply) is not ToolEvent:
                done.set()

        def lost(why: str) -> None:
            failures.append(why)
            done.set()

        self.request(conn_id, request.id, codec.encode(request), deliver, lost)
        if not done.wait(timeout):
            with self._lock:
                self._waiting.pop((conn_id, request.id), None)
            raise TimeoutError(f"node {self.node_id} did not answer within {timeout:g} s")
        if failures:
            raise ChannelLost(failures[0])
        return replies

    def fail(self, why: str) -> None:
        """Give the channel up: every request waiting is told ``why``, and ``on_lost`` too
        unless the channel is being closed."""
        with self._lock:
            if self.lost:
                return
            self.lost = why
            waiting, self._waiting = self._waiting, {}
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        if self._outbox is not None:
            self._outbox.put(None)
        for waiter in waiting.values():
            waiter.lost(why)
        if not self._closing:
            self._on_lost(why)

    def close(self) -> None:
        self._closing = True
        self.fail("the RayEngine stopped")

    def _send(self, frame: bytes, queued: bool = False) -> None:
        sock = self._sock
        if sock is None:
            raise ChannelLost("the channel is not open")
        if queued:
            self._queue(frame)
            return
        try:
            with self._send_lock:
                sock.sendall(frame)
        except OSError as exc:
            self.fail(f"the channel to node {self.node_id} failed: {exc}")

    def _queue(self, frame: bytes) -> None:
        with self._lock:
            if self.lost:
                return  # its request was told why already
            if self._queued_bytes + len(frame) > MAX_QUEUED_BYTES:
                raise ChannelBusy(
                    f"node {self.node_id} is slow to read: {self._queued_bytes >> 20} MiB wait "
                    "to be sent to it"
                )
            self._queued_bytes += len(frame)
            if self._outbox is None:
                self._outbox = queue.SimpleQueue()
                threading.Thread(
                    target=self._write, args=(self._outbox,), name="a2e-ray-write", daemon=True
                ).start()
            outbox = self._outbox
        outbox.put(frame)

    def _write(self, outbox: queue.SimpleQueue[bytes | None]) -> None:
        """The writer thread: queued frames, in order, until the channel fails."""
        while (frame := outbox.get()) is not None and not self.lost:
            with self._lock:
                self._queued_bytes -= len(frame)
            self._send(frame)

    def _read(self, reader: BinaryIO) -> None:
        try:
            while True:
                header = reader.read(HEADER.size)
                if len(header) < HEADER.size:
                    raise EOFError
                length, conn_id = unpack_header(header)
                line = reader.read(length)
                if len(line) < length:
                    raise EOFError
                self._hand_over(conn_id, codec.decode(line))
        except EOFError:
            self.fail(f"node {self.node_id} closed the channel (its engine actor ended)")
        except OSError as exc:
            self.fail(f"the channel to node {self.node_id} failed: {exc}")
        except (FrameError, codec.ProtocolError) as exc:
            self.fail(f"node {self.node_id} sent an unreadable reply: {exc}")

    def _hand_over(self, conn_id: str, reply: A2EMessage) -> None:
        req_id = getattr(reply, "req_id", "")
        key = (conn_id, req_id)
        with self._lock:
            waiter = self._waiting.get(key)
            if waiter is not None and type(reply) is not ToolEvent:
                del self._waiting[key]
            notice = self._watching.get(conn_id) if not req_id else None
        deliver = waiter.deliver if waiter is not None else notice
        if deliver is None:
            return  # it answers what nobody waits for (a cancel that came too late)
        try:
            deliver(reply)
        except Exception:  # one client's bug must not end every client's channel
            log.exception("delivering a reply from node %s", self.node_id)
