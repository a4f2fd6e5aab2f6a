"""``a2e serve --http``: the A2E protocol over WebSocket, driven by real clients (our transport
and the ``websockets`` client) against a real server on 127.0.0.1, and attacked: tokens,
frames that are not messages, sessions of other connections, clients that vanish mid-call."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.frames import Frame, Opcode
from websockets.sync.client import connect

from a2e._client import A2EClient
from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolEvent
from a2e.transports._websocket import TransportRefused, WebSocketTransport
from a2e_engine.engine.service._frame_batches import text_frame
from tests.service_process import ServiceProcess, wait_for

TOKEN = "s3cret-token-for-tests"
SLEEP = "import time\ntime.sleep(60)"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    server = ServiceProcess("--token", TOKEN, "--max-message-bytes", "65536")
    yield server
    assert server.stop() == 0


def _tools(service: ServiceProcess) -> ToolAPI:
    return ToolAPI(A2EClient(WebSocketTransport(service.ws_url, token=TOKEN)))


def test_calls_over_websocket_work_as_in_process(service: ServiceProcess) -> None:
    tools = _tools(service)
    names = {tool.name for tool in tools.list()}
    assert {"python_eval", "run_shell", "code_eval"} <= names
    result = tools.call(tool_name="python_eval", arguments={"code": "print(6 * 7)"})
    assert result.success and result.data["stdout"] == "42\n"
    events: list[str] = []
    streamed = tools.call(
        tool_name="python_eval",
        arguments={"code": "for i in range(3):\n    print(i, flush=True)"},
        streaming=True,
        on_event=lambda event: events.append(event.kind),
    )
    assert streamed.success and events, streamed
    refused = tools.call(tool_name="no_such_tool", arguments={})
    assert refused.error_code == "unknown_tool"
    tools.client.close()


def test_a_stateful_session_over_websocket_is_counted_and_ends_with_it(
    service: ServiceProcess,
) -> None:
    shown = {"Authorization": f"Bearer {TOKEN}"}

    def counted() -> tuple[int, int]:
        ready = httpx.get(f"{service.url}/readyz", headers=shown, timeout=10).json()
        text = httpx.get(f"{service.url}/metrics", headers=shown, timeout=10).text
        (line,) = [line for line in text.splitlines() if line.startswith("a2e_resident_workers ")]
        assert ready["max_resident_workers"] >= 1
        return ready["resident_workers"], int(float(line.split()[1]))

    tools = _tools(service)
    assert tools.call(tool_name="python_session", arguments={"code": "kept = [1]"}).success
    grown = tools.call(tool_name="python_session", arguments={"code": "kept.append(2); kept"})
    assert grown.success and grown.data["display"] == [{"text/plain": "[1, 2]"}], grown
    assert counted() == (1, 1)
    tools.client.close()
    assert wait_for(lambda: counted() == (0, 0))


def test_a_burst_of_events_arrives_whole_and_in_order(service: ServiceProcess) -> None:
    """Events a worker writes at once leave the server in one write (frame_batches), each still
    a message of its own."""
    tools = _tools(service)
    events: list[ToolEvent] = []
    result = tools.call(
        tool_name="python_eval",
        arguments={"code": "for i in range(2000):\n    print(i)"},
        streaming=True,
        on_event=events.append,
    )
    assert result.success
    assert [event.seq for event in events] == list(range(len(events)))
    streamed = "".join(event.data["chunk"] for event in events if event.kind == "artifact")
    assert streamed == result.data["stdout"] == "".join(f"{i}\n" for i in range(2000))
    tools.client.close()


def test_large_messages_are_framed_as_any_websocket_client_reads_them(
    service: ServiceProcess,
) -> None:
    """Frames the server makes itself (frame_batches.text_frame) need a 16- or 64-bit length
    past 125 and 65,535 bytes; the ``websockets`` client parses them independently."""
    for size in (0, 125, 126, 65535, 65536, 100_000):
        payload = b"x" * size
        assert text_frame(payload) == Frame(Opcode.TEXT, payload).serialize(mask=False)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with connect(service.ws_url, additional_headers=bearer, max_size=None) as ws:
        hello = {"type": "handshake/req", "id": "h", "capabilities": ["tools"]}
        ws.send(json.dumps(hello))
        session = json.loads(ws.recv(10))["session_id"]
        code = "print('y' * 70000)"
        call = {"tool_name": "python_eval", "arguments": {"code": code}, "streaming": True}
        ws.send(json.dumps({"type": "tool/call/req", "id": "c", "session_id": session, **call}))
        while (reply := json.loads(ws.recv(10)))["type"] == "tool/event":
            pass
    assert reply["type"] == "tool/call/resp", reply
    result = reply["data"]
    assert result["success"], result
    assert result["data"]["stdout"] == "y" * 70000 + "\n"


def test_several_calls_in_flight_answer_as_each_finishes(service: ServiceProcess) -> None:
    tools = _tools(service)
    slow = tools.start(tool_name="python_eval", arguments={"code": "import time\ntime.sleep(1.5)"})
    fast = tools.start(tool_name="python_eval", arguments={"code": "print('fast')"})
    assert fast.result().success
    assert not slow._pending.done  # the fast one did not wait behind the slow one
    assert slow.result().success
    tools.client.close()


def test_a_cancel_reaches_the_worker(service: ServiceProcess) -> None:
    tools = _tools(service)
    baseline = service.settled_workers()
    pending = tools.start(tool_name="python_eval", arguments={"code": SLEEP}, timeout=60)
    assert wait_for(lambda: service.workers() > baseline, 10)
    started = time.monotonic()
    pending.cancel()
    result = pending.result()
    assert not result.success and "cancelled" in (result.error or "")
    assert time.monotonic() - started < 10
    assert wait_for(lambda: service.workers() <= baseline, 10)
    tools.client.close()


def test_a_client_that_vanishes_mid_call_has_its_calls_killed(service: ServiceProcess) -> None:
    baseline = service.settled_workers()
    with connect(service.ws_url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        hello = {"type": "handshake/req", "id": "h", "client": "t", "capabilities": ["tools"]}
        ws.send(json.dumps(hello))
        assert json.loads(ws.recv(10))["type"] == "handshake/resp"
        call = {"type": "tool/call/req", "id": "c1", "tool_name": "python_eval", "timeout": 60}
        ws.send(json.dumps({**call, "arguments": {"code": SLEEP}}))
        assert wait_for(lambda: service.workers() > baseline, 10)
        ws.socket.shutdown(socket.SHUT_RDWR)  # gone without a close frame
    assert wait_for(lambda: service.workers() <= baseline, 10)


def test_no_token_or_a_wrong_one_is_refused_everywhere_but_healthz(
    service: ServiceProcess,
) -> None:
    with pytest.raises(TransportRefused, match="401 unauthorized: missing token"):
        WebSocketTransport(service.ws_url)
    with pytest.raises(TransportRefused, match="401 unauthorized: wrong token"):
        WebSocketTransport(service.ws_url, token=TOKEN + "x")
    with pytest.raises(InvalidStatus) as refused:
        connect(service.ws_url, additional_headers={"Authorization": f"Bearer {TOKEN[:-1]}"})
    assert refused.value.response.status_code == 401
    with httpx.Client(base_url=service.url, timeout=10) as http:
        assert http.get("/healthz").status_code == 200
        for path in ("/readyz", "/metrics", "/a2e", "/nowhere"):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                response = http.get(path, headers=headers)
                assert response.status_code == 401, (path, headers)
                assert response.json()["error"] == "unauthorized"
        shown = {"Authorization": f"Bearer {TOKEN}"}
        ready = http.get("/readyz", headers=shown).json()
        assert ready["ready"] is True
        assert ready["max_workers"] >= 1 and "per core on" in ready["max_workers_why"], ready
        assert http.get("/readyz", params={"token": TOKEN}).status_code == 200
        assert http.get("/readyz", params={"token": TOKEN + "x"}).status_code == 401
    # The token as a query parameter opens the WebSocket too (clients that only take a URL).
    with connect(f"{service.ws_url}?token={TOKEN}") as ws:
        ws.send(json.dumps({"type": "handshake/req", "id": "h", "client": "t"}))
        assert json.loads(ws.recv(10))["type"] == "handshake/resp"


def test_frames_that_are_not_messages_get_errors_and_the_connection_goes_on(
    service: ServiceProcess,
) -> None:
    with connect(service.ws_url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send("{not json")
        assert json.loads(ws.recv(10))["code"] == "invalid_json"
        ws.send(b"\x00binary")
        reply = json.loads(ws.recv(10))
        assert reply["code"] == "invalid_message" and "text frames" in reply["message"]
        ws.send(json.dumps({"type": "tool/call/req", "id": "x"}))
        assert json.loads(ws.recv(10))["code"] in ("handshake_required", "invalid_message")
        ws.send("x" * 70_000)  # over the limit of 65536, under twice it
        reply = json.loads(ws.recv(10))
        assert reply["code"] == "message_too_large" and "65536" in reply["message"]
        ws.send(json.dumps({"type": "handshake/req", "id": "h", "client": "t"}))
        assert json.loads(ws.recv(10))["type"] == "handshake/resp"
    with connect(service.ws_url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send("x" * 200_000)  # past twice the limit: not even read
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


def test_a_session_belongs_to_the_connection_that_opened_it(service: ServiceProcess) -> None:
    owner = _tools(service)
    pending = owner.start(
        tool_name="python_eval", arguments={"code": "import time\ntime.sleep(1)\nprint('mine')"}
    )
    intruder = _tools(service)
    intruder.client.session_id = owner.client.session_id
    stolen = intruder.call(tool_name="python_eval", arguments={"code": "print(1)"})
    assert stolen.error_code == "unknown_session"
    with connect(service.ws_url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send(json.dumps({"type": "handshake/req", "id": "h", "client": "t"}))
        ws.recv(10)
        cancel = {"type": "tool/cancel/req", "id": "k", "req_id": pending.req_id}
        ws.send(json.dumps({**cancel, "session_id": owner.client.session_id}))
        assert json.loads(ws.recv(10))["code"] == "unknown_request"
    result = pending.result()
    assert result.success and result.data["stdout"] == "mine\n"
    owner.client.close()
    intruder.client.close()


def test_metrics_count_calls_and_refusals(service: ServiceProcess) -> None:
    tools = _tools(service)
    assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success
    tools.call(tool_name="made_up_tool_name", arguments={})
    tools.client.close()
    shown = {"Authorization": f"Bearer {TOKEN}"}
    text = httpx.get(f"{service.url}/metrics", headers=shown, timeout=10).text
    assert 'a2e_calls_total{outcome="success",tool="python_eval"}' in text
    assert 'tool="(unknown)"' in text and "made_up_tool_name" not in text
    assert 'a2e_rejected_requests_total{reason="unauthorized"}' in text
    assert "a2e_call_duration_seconds_bucket" in text and "a2e_workers_waiting" in text
