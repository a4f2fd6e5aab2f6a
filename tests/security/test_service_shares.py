"""What one client of ``a2e serve --http`` can take from the others: connections and the
service's own memory (``engine.service._connections``, ``engine.service._body_budget``).

A real server on 127.0.0.1; the attacker connects from other loopback addresses (127.0.0.2
and up, each its own client address), the victim from 127.0.0.1 with the service's token.
Each attack here left the victim without answers before these defences.
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

from a2e import A2EClient
from a2e.caps.tools import ToolAPI
from a2e.transports import WebSocketTransport
from tests.security.harness import attack
from tests.service_process import ServiceProcess

TOKEN = "s3cret-shares"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Half a request head: no token, never finished.
HALF_A_HEAD = b"POST /run_code HTTP/1.1\r\nHost: a2e\r\nContent-Length: 100\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[ServiceProcess]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    served = ServiceProcess(
        "--max-workers", "2", "--websocket-idle-s", "1", env={"A2E_TOKEN": TOKEN}
    )
    try:
        yield served
    finally:
        served.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _address(server: ServiceProcess) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _flood(server: ServiceProcess, sources: list[str], each: int) -> list[socket.socket]:
    """``each`` connections from every address of ``sources``, half a head sent on each (one
    the server closed at once is left closed)."""
    opened = []
    for source in sources:
        for _ in range(each):
            try:
                sock = socket.create_connection(_address(server), 5, source_address=(source, 0))
                sock.sendall(HALF_A_HEAD)
            except OSError:
                continue
            opened.append(sock)
    return opened


def _victim_answered_under(server: ServiceProcess, sources: list[str], each: int) -> None:
    """The victim's pings get 200 at least nine times in ten while the flood holds its
    connections."""
    sockets = _flood(server, sources, each)
    try:
        statuses = _pings(server, 33)
        assert statuses.count(200) >= 0.9 * len(statuses), statuses
    finally:
        for sock in sockets:
            sock.close()


def _pings(server: ServiceProcess, count: int) -> list[int]:
    """The victim's statuses: ``count`` pings, each on a connection of its own."""
    statuses = []
    for _ in range(count):
        try:
            with httpx.Client(base_url=server.url, timeout=10) as client:
                statuses.append(client.get("/v1/ping", headers=AUTH).status_code)
        except httpx.HTTPError:
            statuses.append(0)
    return statuses


@attack(
    "9a. a thousand half-sent requests from one address",
    full="a client address holds at most its share of the connections",
    reduced="(served with every layer)",
)
def test_one_address_cannot_hold_the_connections(server: ServiceProcess) -> None:
    _victim_answered_under(server, ["127.0.0.2"], 1032)


@attack(
    "9b. half-sent requests from many addresses",
    full="idle connections are bounded apart from working ones; the longest idle is closed",
    reduced="(served with every layer)",
)
def test_idle_connections_cannot_crowd_out_working_ones(server: ServiceProcess) -> None:
    _victim_answered_under(server, [f"127.0.0.{n}" for n in range(10, 56)], 24)


@attack(
    "9c. idle WebSockets held open",
    full="a WebSocket with no call and no message is closed after --websocket-idle-s",
    reduced="(served with every layer)",
)
def test_an_idle_websocket_is_closed_and_a_busy_one_is_not(server: ServiceProcess) -> None:
    import websockets.sync.client as ws_client

    with ws_client.connect(server.ws_url, additional_headers=AUTH, open_timeout=10) as idle:
        started = time.monotonic()
        with pytest.raises(Exception, match="1000"):
            idle.recv(timeout=10)
        assert 0.9 < time.monotonic() - started < 8
    # A call that runs longer than the idle time, with nothing said meanwhile, gets its result.
    client = A2EClient(WebSocketTransport(server.ws_url, token=TOKEN))
    try:
        result = ToolAPI(client).call(
            tool_name="python_eval", arguments={"code": "import time\ntime.sleep(2.5)\n7"}
        )
        assert result.success and result.data["value"] == 7, result
    finally:
        client.close()


def _server_rss_mb(server: ServiceProcess) -> float:
    return float(psutil.Process(server.process.pid).memory_info().rss) / (1 << 20)


@attack(
    "11a. queued bodies that grow once read (nested empty arrays)",
    full="each body is charged what it costs once read, before it is parsed",
    reduced="(served with every layer)",
)
def test_bodies_that_grow_once_read_are_refused_before_they_are(server: ServiceProcess) -> None:
    nested = b'{"arguments": {"program": "print(1)", "test_cases": [' + b"[]," * 2_300_000
    nested += b"[]]}}"
    before = _server_rss_mb(server)

    def post() -> int:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            return client.post("/v1/tools/code_eval", content=nested, headers=AUTH).status_code

    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(post())) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [413] * 6, statuses
    assert _server_rss_mb(server) - before < 200, (before, _server_rss_mb(server))
    # A large body of text is still read and answered.
    program = "x = 1\n" + "#" * (4 << 20) + "\nprint(x)\n"
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answer = client.post(
            "/run_code", json={"code": program, "language": "python"}, headers=AUTH
        )
    assert answer.status_code == 200 and answer.json()["run_result"]["stdout"] == "1\n"


@attack(
    "11b. 15 MiB bodies of many small values, sent over and over",
    full="what a body may hold once read is bounded before it is parsed; long ones are "
    "parsed off the loop's thread",
    reduced="(served with every layer)",
)
def test_large_bodies_do_not_stall_the_service(server: ServiceProcess) -> None:
    cases = [{"input": "1", "output": "1"}] * 500_000
    body = json.dumps({"arguments": {"program": "print(1)", "test_cases": cases}}).encode()
    stop = threading.Event()

    def flood() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    client.post("/v1/tools/code_eval", content=body, headers=AUTH)

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        latencies = []
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for _ in range(30):
                started = time.monotonic()
                assert client.get("/healthz").status_code == 200
                latencies.append(time.monotonic() - started)
                time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    # Before: a median of 170 ms and a second at worst, each body parsed on the loop.
    assert statistics.median(latencies) < 0.1, latencies
    assert max(latencies) < 0.75, latencies


# -- 8. the sandbox's memory, shared by tenants --

#: Filled a MiB at a time in the session's workspace (its tmpfs pages are what it holds).
FILL = (
    "for mib in range({mb}):\n"
    "    with open(f'fill{{mib // 64}}', 'ab') as fh:\n"
    "        fh.write(b'x' * (1 << 20))\n"
    "'filled'"
)


VICTIM_KEY, HOG_KEY = "key-of-the-victim", "key-of-the-hog"


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A server whose sandbox may hold 640 MiB in all, with a key for each client."""
    folder = tmp_path_factory.mktemp("bounded")
    config, keys = folder / "a2e.toml", folder / "keys"
    config.write_text(
        "[engine]\nmax_workers = 3\nworkspace_mb = 256\n"
        "[engine.admission]\nsandbox_memory_mb = 640\n"
    )
    keys.write_text(f"# one a client\n{VICTIM_KEY}\n{HOG_KEY}\n")
    served = ServiceProcess("--config", str(config), "--api-key-file", str(keys))
    try:
        yield served
    finally:
        served.stop()


def _session(server: ServiceProcess, key: str) -> tuple[A2EClient, ToolAPI]:
    client = A2EClient(WebSocketTransport(server.ws_url, token=key))
    return client, ToolAPI(client)


def _run_code(server: ServiceProcess, key: str, code: str = "print(7)") -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        return client.post(
            "/run_code",
            json={"code": code, "language": "python"},
            headers={"Authorization": f"Bearer {key}"},
        )


@attack(
    "8a. idle sessions of one client fill the sandbox's memory",
    full="past the high-water mark a new session is refused only to a tenant past its share",
    reduced="(served with every layer)",
)
def test_a_tenants_idle_sessions_turn_only_itself_away(bounded: ServiceProcess) -> None:
    hogs = [_session(bounded, HOG_KEY) for _ in range(4)]
    try:
        for _, tools in hogs:
            filled = tools.call(tool_name="python_eval", arguments={"code": FILL.format(mb=140)})
            assert filled.success, filled.error
        answers = [_run_code(bounded, VICTIM_KEY) for _ in range(5)]
        assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
        client, tools = _session(bounded, VICTIM_KEY)  # a new handshake is admitted
        try:
            answer = tools.call(tool_name="python_eval", arguments={"code": "6 * 7"})
            assert answer.success and answer.data["value"] == 42, answer
        finally:
            client.close()
        turned = _run_code(bounded, HOG_KEY)
        assert turned.status_code == 429, turned.text
    finally:
        for client, _ in hogs:
            client.close()


#: Memory a REST call holds in memfds, for a few seconds.
HOLDS_MEMFDS = (
    "import os, time\n"
    "fds = [os.memfd_create('held') for _ in range(4)]\n"
    "block = b'x' * (1 << 20)\n"
    "for fd in fds:\n"
    "    for i in range(120):\n"
    "        os.pwrite(fd, block, i << 20)\n"
    "time.sleep(6)\n"
    "print('held')\n"
)


@attack(
    "8b. a running call's memfds push the sandbox past its pressure mark",
    full="what a running call holds is its session's: that session is the one ended",
    reduced="(served with every layer)",
)
def test_pressure_ends_the_session_that_holds_it(bounded: ServiceProcess) -> None:
    client, victim = _session(bounded, VICTIM_KEY)
    try:
        kept = victim.call(tool_name="python_eval", arguments={"code": FILL.format(mb=100)})
        assert kept.success, kept.error
        hog = _run_code(bounded, HOG_KEY, HOLDS_MEMFDS)
        assert hog.status_code == 200 and "ran short of memory" in hog.json()["message"], hog.text
        still = victim.call(
            tool_name="python_eval", arguments={"code": "import os\nos.path.getsize('fill0')"}
        )
        assert still.success and still.data["value"] == 64 << 20, still
    finally:
        client.close()
