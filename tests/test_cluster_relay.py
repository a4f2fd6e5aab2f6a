"""A node's relay and a driver's channel to it, without Ray: a real engine, real sockets on
loopback, and peers that attack the listener (no token, a wrong one, frames past the limit,
malformed headers, someone else's connection). Each attack ends that peer's channel or earns
it an ``error`` reply; the engine and every other channel keep serving."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from a2e import _codec as codec
from a2e._messages import A2EError, A2EMessage, ErrorCode, HandshakeRequest, HandshakeResponse
from a2e.caps.tools._models import ToolCallRequest, ToolCallResponse, ToolCancelRequest, ToolEvent
from a2e_engine.engine import Engine
from a2e_engine.engine._host_session import LocalSession
from a2e_engine.engine.cluster import _channel as channel_module
from a2e_engine.engine.cluster._channel import ChannelBusy, ChannelLost, NodeChannel
from a2e_engine.engine.cluster._frames import HEADER, MAX_LINE_BYTES, TOKEN_BYTES, pack
from a2e_engine.engine.cluster._relay import Relay
from tests.waiting import wait_for

SOCKET_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def relay(engine: Engine) -> Iterator[tuple[Relay, tuple[str, int]]]:
    relay = Relay(engine, "node-under-test", auth_timeout_s=0.5)
    address = engine.run(relay.listen("127.0.0.1"), timeout=10)
    yield relay, address
    engine.run(relay.stop(), timeout=10)


def _peer(address: tuple[str, int], token: bytes | None) -> socket.socket:
    sock = socket.create_connection(address, timeout=SOCKET_TIMEOUT_S)
    if token is not None:
        sock.sendall(token)
    return sock


def _closed_by_relay(sock: socket.socket) -> bool:
    """Whether the relay closed the socket without sending anything."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _read_reply(sock: socket.socket) -> tuple[str, A2EMessage]:
    stream = sock.makefile("rb")
    length, raw_id = HEADER.unpack(stream.read(HEADER.size))
    return raw_id.decode(), codec.decode(stream.read(length))


def _opened(engine: Engine, relay: Relay) -> str:
    conn_id = uuid.uuid4().hex
    engine.run(relay.open(conn_id, None), timeout=10)
    return conn_id


def _channel(relay: Relay, address: tuple[str, int], lost: list[str]) -> NodeChannel:
    return NodeChannel("node-under-test", address, relay.token, lost.append).open()


def _session(channel: NodeChannel, conn_id: str) -> str:
    [reply] = channel.ask(
        conn_id, HandshakeRequest(client="relay-test", capabilities=["tools"]), SOCKET_TIMEOUT_S
    )
    assert isinstance(reply, HandshakeResponse), reply
    return reply.session_id


@dataclass
class _Client:
    """A driver's channel with one client connection open on it, and its session."""

    channel: NodeChannel
    conn_id: str
    session_id: str
    lost: list[str]  # what the channel told ``on_lost``

    def call(self, tool: str, **arguments: object) -> list[A2EMessage]:
        request = ToolCallRequest(
            session_id=self.session_id, tool_name=tool, arguments=arguments, streaming=True
        )
        return self.channel.ask(self.conn_id, request, SOCKET_TIMEOUT_S)

    def still_served(self) -> None:
        *_, response = self.call("emit", count=1)
        assert isinstance(response, ToolCallResponse) and response.data.success, response
        assert self.lost == []


def _client(engine: Engine, relay: tuple[Relay, tuple[str, int]]) -> _Client:
    lost: list[str] = []
    channel = _channel(relay[0], relay[1], lost)
    conn_id = _opened(engine, relay[0])
    return _Client(channel, conn_id, _session(channel, conn_id), lost)


def test_a_channel_carries_a_call_and_its_events_with_the_node_named(
    engine: Engine, relay: tuple[Relay, tuple[str, int]]
) -> None:
    client = _client(engine, relay)
    *events, response = client.call("emit", count=3)
    assert [type(event) for event in events] == [ToolEvent] * len(events) and len(events) >= 3
    assert isinstance(response, ToolCallResponse) and response.data.success, response
    assert response.data.usage is not None and response.data.usage.node_id == "node-under-test"
    client.channel.close()
    assert client.lost == []  # closing is not losing


@pytest.mark.parametrize("token", [None, b"x" * TOKEN_BYTES], ids=["silent", "wrong token"])
def test_a_peer_without_the_token_is_dropped_unanswered(
    engine: Engine, relay: tuple[Relay, tuple[str, int]], token: bytes | None
) -> None:
    conn_id = _opened(engine, relay[0])
    sock = _peer(relay[1], token)
    if token is not None:  # it tries to use a connection right away, too
        sock.sendall(pack(conn_id, codec.encode(HandshakeRequest(client="intruder"))))
    assert _closed_by_relay(sock)
    assert relay[0]._connections[conn_id].writer is None  # nothing got bound to it


@pytest.mark.parametrize(
    "header",
    [
        HEADER.pack(MAX_LINE_BYTES + 1, b"a" * 32),
        HEADER.pack(0xFFFFFFFF, b"a" * 32),
        HEADER.pack(10, b"not-hex-not-hex-not-hex-not-hex!"),
    ],
    ids=["one past the limit", "4 GiB", "bad connection id"],
)
def test_a_bad_frame_ends_that_channel_only(
    engine: Engine, relay: tuple[Relay, tuple[str, int]], header: bytes
) -> None:
    bystander = _client(engine, relay)
    attacker = _peer(relay[1], relay[0].token)
    attacker.sendall(header)
    assert _closed_by_relay(attacker)
    bystander.still_served()
    bystander.channel.close()


def test_frames_for_a_connection_never_opened_or_another_channels_are_refused(
    engine: Engine, relay: tuple[Relay, tuple[str, int]]
) -> None:
    owner = _client(engine, relay)
    other = _peer(relay[1], relay[0].token)
    for target in (uuid.uuid4().hex, owner.conn_id):  # not open; open, but bound to the owner
        request = ToolCallRequest(
            session_id=owner.session_id, tool_name="emit", arguments={"count": 1}
        )
        other.sendall(pack(target, codec.encode(request)))
        replied_for, reply = _read_reply(other)
        assert replied_for == target
        assert isinstance(reply, A2EError) and reply.code == ErrorCode.UNKNOWN_SESSION, reply
        assert reply.req_id == request.id
    other.close()
    owner.still_served()
    owner.channel.close()


def test_an_unreadable_line_is_answered_and_the_channel_goes_on(
    engine: Engine, relay: tuple[Relay, tuple[str, int]]
) -> None:
    conn_id = _opened(engine, relay[0])
    sock = _peer(relay[1], relay[0].token)
    sock.sendall(pack(conn_id, "{not json"))
    _, reply = _read_reply(sock)
    assert isinstance(reply, A2EError) and reply.code == ErrorCode.INVALID_JSON, reply
    sock.sendall(pack(conn_id, codec.encode(HandshakeRequest(client="after-garbage"))))
    _, reply = _read_reply(sock)
    assert isinstance(reply, HandshakeResponse), reply
    sock.close()


def test_a_channel_that_closes_ends_its_connections_calls(
    engine: Engine, relay: tuple[Relay, tuple[str, int]]
) -> None:
    client = _client(engine, relay)
    started = threading.Event()
    outcome: list[str] = []

    def deliver(message: A2EMessage) -> None:
        started.set()

    request = ToolCallRequest(
        session_id=client.session_id, tool_name="sleep", arguments={"seconds": 30}, streaming=True
    )
    line = codec.encode(request)
    client.channel.request(client.conn_id, request.id, line, deliver, outcome.append)
    assert started.wait(SOCKET_TIMEOUT_S)  # its first event: the worker runs
    assert engine.status().calls_running >= 1
    client.channel.close()
    assert outcome == ["the RayEngine stopped"]  # the waiting request is told, once

    deadline = time.monotonic() + SOCKET_TIMEOUT_S
    while client.conn_id in relay[0]._connections or engine.status().calls_running:
        assert time.monotonic() < deadline, "the dropped channel's call kept running"
        time.sleep(0.05)


def test_a_node_that_goes_away_fails_every_waiting_request_and_later_ones(
    engine: Engine,
) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    lost: list[str] = []
    channel = NodeChannel("vanishing", server.getsockname()[:2], b"t" * TOKEN_BYTES, lost.append)
    channel.open()
    accepted, _ = server.accept()
    failures: list[str] = []
    for _ in range(3):
        channel.request(uuid.uuid4().hex, uuid.uuid4().hex, "{}", print, failures.append)
    accepted.close()  # the actor's process died
    server.close()
    deadline = time.monotonic() + SOCKET_TIMEOUT_S
    while len(failures) < 3:
        assert time.monotonic() < deadline, failures
        time.sleep(0.01)
    assert len(lost) == 1 and "vanishing" in lost[0], lost
    assert set(failures) == {lost[0]}
    channel.request(uuid.uuid4().hex, "late", "{}", print, failures.append)
    assert failures[-1] == lost[0]
    with pytest.raises(ChannelLost):
        channel.ask(uuid.uuid4().hex, HandshakeRequest(client="late"), 1)


def test_a_relay_that_stops_ends_its_channels_without_an_error(engine: Engine) -> None:
    """A node's engine stopping (the RayEngine closed) ends every channel, one in use and one
    still to send its token, as a driver hanging up would: nothing reaches the loop's
    exception handler (Python 3.11 logs a connection handler that ends cancelled as one)."""
    errors: list[dict[str, object]] = []

    async def watch_errors() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: errors.append(context))

    async def default_errors() -> None:
        asyncio.get_running_loop().set_exception_handler(None)

    relay = Relay(engine, "node-stopping")
    address = engine.run(relay.listen("127.0.0.1"), timeout=10)
    engine.run(watch_errors(), timeout=10)
    try:
        client = _client(engine, (relay, address))
        client.still_served()
        silent = _peer(address, None)
        assert wait_for(lambda: len(relay._channels) == 2)
        engine.run(relay.stop(), timeout=10)
        assert _closed_by_relay(silent)
        assert wait_for(lambda: bool(client.lost)), "the driver's channel was not ended"
        assert not relay._channels and not relay._connections
    finally:
        engine.run(default_errors(), timeout=10)
    assert errors == []


def _served(engine: Engine, relay: Relay) -> tuple[str, LocalSession]:
    """A session the node opened itself (as ``NodeEngine.open_session`` does), served on a
    connection of the relay's."""

    async def open_and_attach() -> tuple[str, LocalSession]:
        session = await engine.open_session("relay-test", lasting=True, tenant="t")
        conn_id = uuid.uuid4().hex
        relay.attach(conn_id, session)
        return conn_id, session

    return engine.run(open_and_attach(), timeout=10)


def test_a_session_the_node_opened_is_served_without_a_handshake(
    engine: Engine, relay: tuple[Relay, tuple[str, int]]
) -> None:
    """An empty frame binds it; queued requests (an event loop's) reach it in order: a call
    with its events, and a cancel that ends the next call; a handshake, or a call naming
    another session, is refused, and the session goes on."""
    conn_id, session = _served(engine, relay[0])
    lost: list[str] = []
    channel = _channel(relay[0], relay[1], lost)
    channel.post(conn_id, "", queued=True)
    assert wait_for(lambda: relay[0]._connections[conn_id].writer is not None)

    call = ToolCallRequest(
        session_id=session.session_id, tool_name="emit", arguments={"count": 2}, streaming=True
    )
    *events, response = channel.ask(conn_id, call, SOCKET_TIMEOUT_S)
    assert events and all(isinstance(event, ToolEvent) for event in events)
    assert isinstance(response, ToolCallResponse) and response.data.success, response

    for refused, code in (
        (HandshakeRequest(client="second"), ErrorCode.INVALID_MESSAGE),
        (
            call.model_copy(update={"id": "other", "session_id": "s-else"}),
            ErrorCode.UNKNOWN_SESSION,
        ),
    ):
        [reply] = channel.ask(conn_id, refused, SOCKET_TIMEOUT_S)
        assert isinstance(reply, A2EError) and reply.code == code, reply

    replies: list[A2EMessage] = []
    ended = threading.Event()

    def deliver(message: A2EMessage) -> None:
        replies.append(message)
        if isinstance(message, ToolCallResponse):
            ended.set()

    sleeping = ToolCallRequest(tool_name="sleep", arguments={"seconds": 30}, timeout=40)
    cancel = ToolCancelRequest(req_id=sleeping.id)
    channel.request(conn_id, sleeping.id, codec.encode(sleeping), deliver, lost.append, True)
    channel.post(conn_id, codec.encode(cancel), queued=True)  # right behind it, unwaited
    assert ended.wait(SOCKET_TIMEOUT_S), "the cancel did not end the call"
    assert isinstance(replies[-1], ToolCallResponse) and not replies[-1].data.success
    assert replies[-1].data.duration_ms < SOCKET_TIMEOUT_S * 1000
    channel.close()
    assert wait_for(lambda: session.closed), "the channel's end did not end its session"
    assert lost == []


def test_a_served_session_no_driver_ever_binds_is_ended(engine: Engine) -> None:
    """A driver that dies between opening a session through Ray and its first frame leaves
    nothing: the connection, and its session, end after ``bind_timeout_s``; one bound in
    time stays."""
    relay = Relay(engine, "node-binding", bind_timeout_s=0.5)
    address = engine.run(relay.listen("127.0.0.1"), timeout=10)
    try:
        conn_id, session = _served(engine, relay)
        kept_id, kept = _served(engine, relay)
        channel = _channel(relay, address, [])
        channel.post(kept_id, "", queued=True)
        assert wait_for(lambda: session.closed), "the unbound session was kept"
        assert conn_id not in relay._connections
        time.sleep(0.5)  # past the bound one's deadline too
        assert not kept.closed and relay.served(kept_id) is kept
        channel.close()
    finally:
        engine.run(relay.stop(), timeout=10)


def test_a_session_its_node_ends_tells_its_driver_why_at_once(
    engine: Engine, relay: tuple[Relay, tuple[str, int]]
) -> None:
    """Memory running short, the node's engine ends a served session: the driver hears it
    on that connection without asking (``NodeChannel.watch``), with the reason."""
    conn_id, session = _served(engine, relay[0])
    channel = _channel(relay[0], relay[1], [])
    notices: list[A2EMessage] = []
    channel.watch(conn_id, notices.append)
    channel.post(conn_id, "", queued=True)
    assert wait_for(lambda: relay[0]._connections[conn_id].writer is not None)

    async def evict() -> None:
        session.evict("the sandbox ran short of memory")

    engine.run(evict(), timeout=10)
    assert wait_for(lambda: bool(notices)), "the driver was not told"
    [notice] = notices
    assert isinstance(notice, A2EError) and notice.code == ErrorCode.UNKNOWN_SESSION
    assert "ran short of memory" in notice.message
    channel.close()


def test_a_node_that_reads_nothing_cannot_fill_the_drivers_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Queued requests to a node that stopped reading are bounded: past the bound they are
    refused (``ChannelBusy``), and the requests refused wait for nothing."""
    monkeypatch.setattr(channel_module, "MAX_QUEUED_BYTES", 1 << 20)
    server = socket.create_server(("127.0.0.1", 0))
    channel = NodeChannel("stalled", server.getsockname()[:2], b"t" * TOKEN_BYTES, print)
    channel.open()
    accepted, _ = server.accept()  # and never read
    line = "x" * (256 << 10)
    with pytest.raises(ChannelBusy):
        for index in range(1000):  # the socket's buffers take a few MiB first
            channel.request(uuid.uuid4().hex, str(index), line, print, print, queued=True)
    assert index >= 3  # what the bound holds, and what the writer took
    waiting = len(channel._waiting)
    assert waiting == index  # the refused one is not waited for
    channel.close()
    accepted.close()
    server.close()
