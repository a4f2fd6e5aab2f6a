"""``WebSocketTransport`` on its own, against WebSocket servers on 127.0.0.1 that misbehave in
ways ``a2e serve --http`` never does: pings it must answer, a server that goes silent, one that
never ends a close, frames cut anywhere. And ``Inbound``, which reads plain text frames itself
and must hand everything else to ``websockets``' protocol exactly as the protocol would see it."""

from __future__ import annotations

import base64
import hashlib
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.sync.server import ServerConnection, serve
from websockets.uri import parse_uri

from a2e._client import A2EClient
from a2e._codec import encode
from a2e._messages import A2EError, HandshakeRequest
from a2e.transports._websocket import WebSocketTransport
from a2e.transports._websocket_inbound import Inbound

MESSAGE = encode(A2EError(code="internal", message="hello from the server"))


def _protocol() -> ClientProtocol:
    return ClientProtocol(parse_uri("ws://127.0.0.1/a2e"), state=State.OPEN, max_size=1 << 20)


def _wire(*frames: Frame) -> bytes:
    return b"".join(frame.serialize(mask=False) for frame in frames)


def _messages(items: list[bytes | Frame]) -> list[bytes]:
    """Whole messages from ``Inbound``'s output, fragments joined as the transport joins them."""
    messages, parts = [], []
    for item in items:
        if isinstance(item, bytes):
            messages.append(item)
        elif item.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):
            parts.append(bytes(item.data))
            if item.fin:
                messages.append(b"".join(parts))
                parts = []
    return messages


# Inbound: frames cut anywhere, every header size, control frames in between.


def test_inbound_gives_the_same_messages_however_the_bytes_are_cut() -> None:
    sizes = [0, 1, 125, 126, 127, 65535, 65536, 70000]
    texts = [bytes([65 + i % 26]) * size for i, size in enumerate(sizes)]
    frames = [Frame(Opcode.TEXT, text) for text in texts]
    frames.insert(3, Frame(Opcode.PING, b"p1"))
    fragmented = [
        Frame(Opcode.TEXT, b"frag", fin=False),
        Frame(Opcode.PING, b"p2"),
        Frame(Opcode.CONT, b"men", fin=False),
        Frame(Opcode.CONT, b"ted", fin=True),
    ]
    stream = _wire(*frames, *fragmented, Frame(Opcode.BINARY, b"\x00bin"))
    expected = [*texts, b"fragmented", b"\x00bin"]
    rng = random.Random(7)
    cuts: list[Callable[[], int]] = [lambda: len(stream), lambda: rng.randint(1, 9)]
    cuts += [lambda: rng.randint(1, 70000)]
    for cut in cuts:
        protocol = _protocol()
        inbound = Inbound(protocol, 1 << 20, [])
        out: list[bytes | Frame] = []
        offset = 0
        while offset < len(stream):
            size = cut()
            out += inbound.feed(stream[offset : offset + size])
            offset += size
        assert _messages(out) == expected
        pongs = [data for data in protocol.data_to_send() if data[0] == 0x8A]
        assert len(pongs) == 2, "each ping is answered by the protocol"
        assert protocol.state is State.OPEN


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        # A whole text frame in the middle of a fragmented message breaks the protocol.
        (_wire(Frame(Opcode.TEXT, b"a", fin=False), Frame(Opcode.TEXT, b"{}")), 1002),
        # A server must not mask its frames.
        (Frame(Opcode.TEXT, b"{}").serialize(mask=True), 1002),
        # Larger than the limit: refused, not buffered.
        (_wire(Frame(Opcode.TEXT, b"x" * 1001)), 1009),
        # An extension bit nobody agreed to (RSV1, on a whole text frame).
        (bytes([0xC1, 2]) + b"{}", 1002),
    ],
    ids=["text-inside-fragments", "masked", "too-large", "rsv1"],
)
def test_inbound_leaves_every_frame_it_does_not_read_to_the_protocol(
    wire: bytes, code: int
) -> None:
    protocol = ClientProtocol(parse_uri("ws://127.0.0.1/a2e"), state=State.OPEN, max_size=1000)
    inbound = Inbound(protocol, 1000, [])
    assert _messages(inbound.feed(wire)) == []
    assert protocol.state is State.CLOSING
    assert protocol.close_sent is not None and protocol.close_sent.code == code


def test_inbound_refuses_a_huge_frame_from_its_header_alone() -> None:
    protocol = ClientProtocol(parse_uri("ws://127.0.0.1/a2e"), state=State.OPEN, max_size=1000)
    inbound = Inbound(protocol, 1000, [])
    header = bytes([0x81, 127]) + (1 << 40).to_bytes(8, "big")
    assert inbound.feed(header + b"x" * 100) == []
    assert protocol.close_sent is not None and protocol.close_sent.code == 1009
    assert inbound.feed(b"x" * 100_000) == [], "what follows is discarded, not kept"


def test_inbound_reads_nothing_after_the_servers_close() -> None:
    protocol = _protocol()
    inbound = Inbound(protocol, 1 << 20, [])
    out = inbound.feed(_wire(Frame(Opcode.CLOSE, b"\x03\xe8bye"), Frame(Opcode.TEXT, b"late")))
    assert _messages(out) == []
    assert protocol.close_rcvd is not None and protocol.close_rcvd.reason == "bye"


# The transport against real servers.


@pytest.fixture
def websockets_server() -> Iterator[Callable[..., str]]:
    """Start a ``websockets`` server with a given handler and options; yields its URL."""
    servers = []

    def start(handler: Callable[[ServerConnection], None], **options: object) -> str:
        server = serve(handler, "127.0.0.1", 0, **options)  # type: ignore[arg-type]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"ws://127.0.0.1:{server.socket.getsockname()[1]}/a2e"

    yield start
    for server in servers:
        server.shutdown()


def test_the_servers_pings_are_answered(websockets_server: Callable[..., str]) -> None:
    """The server closes a connection whose pong is late by 0.3 s; this one stays up 1.5 s."""

    def handler(ws: ServerConnection) -> None:
        time.sleep(1.5)
        ws.send(MESSAGE)
        ws.recv()

    url = websockets_server(handler, ping_interval=0.1, ping_timeout=0.3)
    transport = WebSocketTransport(url)
    message = transport.receive()
    assert isinstance(message, A2EError) and message.message == "hello from the server"
    transport.close()


def test_fragmented_messages_are_joined(websockets_server: Callable[..., str]) -> None:
    def handler(ws: ServerConnection) -> None:
        ws.send([MESSAGE[:10], MESSAGE[10:20], MESSAGE[20:]])
        ws.recv()

    transport = WebSocketTransport(websockets_server(handler))
    message = transport.receive()
    assert isinstance(message, A2EError) and message.message == "hello from the server"
    transport.close()


def test_the_servers_close_reason_is_kept(websockets_server: Callable[..., str]) -> None:
    def handler(ws: ServerConnection) -> None:
        ws.close(1008, "policy: go away")

    transport = WebSocketTransport(websockets_server(handler))
    assert transport.receive() is None
    assert transport.close_reason == "1008 policy: go away"
    transport.close()


def test_close_is_a_clean_close_even_with_a_reader_waiting(
    websockets_server: Callable[..., str],
) -> None:
    codes: list[int | None] = []

    def handler(ws: ServerConnection) -> None:
        for _ in ws:
            pass
        codes.append(ws.close_code)

    transport = WebSocketTransport(websockets_server(handler))
    received: list[object] = []
    reader = threading.Thread(target=lambda: received.append(transport.receive()))
    reader.start()
    time.sleep(0.2)
    started = time.monotonic()
    transport.close()
    reader.join(5)
    assert not reader.is_alive() and received == [None]
    assert time.monotonic() - started < 1.0
    assert _eventually(lambda: codes == [1000])


class RawServer:
    """Accepts one connection and answers its upgrade with 101, with ``extra`` bytes in the same
    write; then sends nothing more, and reads only when a test asks what the client sent."""

    def __init__(self, extra: bytes = b"") -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"ws://127.0.0.1:{self._listener.getsockname()[1]}/a2e"
        self._extra = extra
        self._conn: socket.socket | None = None
        self._upgraded = threading.Event()
        self._thread = threading.Thread(target=self._serve_one, daemon=True)
        self._thread.start()

    def _serve_one(self) -> None:
        conn, _ = self._listener.accept()
        self._conn = conn
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(4096)
        key = next(
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        guid = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
        accept = base64.b64encode(hashlib.sha1(key + guid).digest())
        conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n" + self._extra
        )
        self._upgraded.set()

    def received(self, seconds: float) -> bytes:
        """What the client sent after the upgrade, within ``seconds``."""
        assert self._upgraded.wait(5) and self._conn is not None
        self._conn.settimeout(seconds)
        try:
            return self._conn.recv(4096)
        except TimeoutError:
            return b""

    def send(self, data: bytes) -> None:
        assert self._upgraded.wait(5) and self._conn is not None
        self._conn.sendall(data)

    def close(self) -> None:
        self._thread.join(5)
        if self._conn is not None:
            self._conn.close()
        self._listener.close()


@pytest.fixture
def raw_server() -> Iterator[Callable[[bytes], RawServer]]:
    started: list[RawServer] = []

    def start(extra: bytes = b"") -> RawServer:
        started.append(RawServer(extra))
        return started[-1]

    yield start
    for server in started:
        server.close()


@pytest.fixture
def silent_server(raw_server: Callable[[bytes], RawServer]) -> str:
    return raw_server(b"").url


def test_a_close_that_comes_with_the_upgrade_is_answered_at_once(
    raw_server: Callable[[bytes], RawServer],
) -> None:
    server = raw_server(_wire(Frame(Opcode.CLOSE, b"\x03\xe8bye")))
    transport = WebSocketTransport(server.url)
    echo = server.received(2)
    assert echo[:1] == b"\x88", "the close is echoed before anyone reads"
    server.close()  # the server ends the stream, as it should after the echo
    assert transport.receive() is None
    assert transport.close_reason == "1000 bye"
    transport.close()


def test_a_fragmented_message_begun_with_the_upgrade_is_still_judged_whole(
    raw_server: Callable[[bytes], RawServer],
) -> None:
    """A whole text frame may not come inside a fragmented message, even one that began in the
    bytes the upgrade's answer brought."""
    server = raw_server(_wire(Frame(Opcode.TEXT, b'{"a', fin=False)))
    transport = WebSocketTransport(server.url)
    server.send(_wire(Frame(Opcode.TEXT, MESSAGE.encode())))
    server.close()
    assert transport.receive() is None
    assert transport.close_reason.startswith("1002 ")
    transport.close()


def test_a_server_gone_silent_is_taken_as_gone(silent_server: str) -> None:
    """What is waiting fails, saying why, after two quiet intervals: not never."""
    client = A2EClient(WebSocketTransport(silent_server, ping_interval=0.2), handshake=False)
    started = time.monotonic()
    pending = client.start(HandshakeRequest(client="t"))
    assert pending.wait(5) is None
    assert 0.3 < time.monotonic() - started < 2.0
    assert pending.closed_reason.endswith(": no answer from the server for 0.4 s")
    client.close()


def test_a_ping_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ping_interval must be a positive number"):
        WebSocketTransport("ws://127.0.0.1:9/a2e", ping_interval=0)


def test_close_does_not_wait_long_for_a_server_that_never_answers(silent_server: str) -> None:
    transport = WebSocketTransport(silent_server)
    started = time.monotonic()
    transport.close()
    assert time.monotonic() - started < 3.0
    assert transport.receive() is None


def _eventually(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 5
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()
