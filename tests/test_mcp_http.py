"""``/mcp`` on ``a2e serve --http``: MCP's Streamable HTTP transport on a real server on
127.0.0.1, driven by the official MCP SDK's client (and by httpx for what that client would
never send): tools and results, progress, a cancel that kills the worker, the token, and a
body that is not JSON-RPC."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.mcp_raw import INITIALIZE
from tests.service_process import ServiceProcess, wait_for

TOKEN = "mcp-http-token"
BENCH = "a2e_engine.benchmarks._workloads:BenchTools"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    server = ServiceProcess("--token", TOKEN, "--plugin", BENCH, "--call-timeout-s", "20")
    yield server
    assert server.stop() == 0


@asynccontextmanager
async def _mcp(service: ServiceProcess) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(f"{service.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _run(scenario: Any) -> Any:
    return asyncio.run(asyncio.wait_for(scenario, 120))


def test_tools_results_and_progress_over_streamable_http(service: ServiceProcess) -> None:
    async def scenario() -> None:
        async with _mcp(service) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"python_eval", "emit_events", "code_eval"} <= names
            result = await session.call_tool("python_eval", {"code": "6 * 7"})
            assert not result.is_error and result.structured_content["value"] == 42  # type: ignore[index]
            seen: list[float] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                seen.append(progress)

            emitted = await session.call_tool("emit_events", {}, progress_callback=on_progress)
            assert not emitted.is_error and seen and seen[-1] == 99.0
            # One MCP session is one engine session: a file written stays for the next call.
            write = {"code": "open('note.txt', 'w').write('kept')"}
            assert not (await session.call_tool("python_eval", write)).is_error
            read = await session.call_tool("python_eval", {"code": "open('note.txt').read()"})
            assert read.structured_content["value"] == "kept"  # type: ignore[index]
        async with _mcp(service) as other:
            fresh = await other.call_tool("python_eval", {"code": "open('note.txt').read()"})
            assert fresh.is_error, "another MCP session has a workspace of its own"

    _run(scenario())


def test_a_cancelled_call_over_http_has_its_worker_killed(service: ServiceProcess) -> None:
    async def scenario() -> None:
        async with _mcp(service) as session:
            baseline = await asyncio.to_thread(service.settled_workers)
            sleeper = {"code": "import time\ntime.sleep(60)"}
            call = asyncio.ensure_future(session.call_tool("python_eval", sleeper))
            assert await asyncio.to_thread(wait_for, lambda: service.workers() > baseline, 10)
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            assert await asyncio.to_thread(wait_for, lambda: service.workers() <= baseline, 10)
            after = await session.call_tool("python_eval", {"code": "1 + 1"})
            assert after.structured_content["value"] == 2  # type: ignore[index]

    _run(scenario())


def test_mcp_wants_the_token_and_answers_bad_json_rpc(service: ServiceProcess) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(base_url=service.url, timeout=30) as http:
        refused = http.post("/mcp", json=INITIALIZE, headers=headers)
        assert refused.status_code == 401
        wrong = {**headers, "Authorization": "Bearer not-it"}
        assert http.post("/mcp", json=INITIALIZE, headers=wrong).status_code == 401
        auth = {**headers, "Authorization": f"Bearer {TOKEN}"}
        opened = http.post("/mcp", json=INITIALIZE, headers=auth)
        assert opened.status_code == 200, opened.text
        session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        broken = http.post("/mcp", content=b"{not json", headers=session)
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
        # The session goes on: a ping after the broken body is answered.
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        http.post(
            "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        answered = http.post("/mcp", json=ping, headers=session)
        assert answered.status_code == 200, answered.text
        lines = [line for line in answered.text.splitlines() if line.startswith("data: ")]
        body = json.loads(lines[-1][len("data: ") :]) if lines else answered.json()
        assert body["id"] == 2 and "result" in body


def test_deleting_an_mcp_session_ends_its_engine_session(service: ServiceProcess) -> None:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {TOKEN}",
    }
    with httpx.Client(base_url=service.url, headers=headers, timeout=30) as http:

        def sessions() -> int:
            text = http.get("/metrics").text
            (line,) = [line for line in text.splitlines() if line.startswith("a2e_sessions ")]
            return int(float(line.split()[1]))

        before = sessions()
        opened = http.post("/mcp", json=INITIALIZE)
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        http.post("/mcp", json=initialized, headers=session)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert http.post("/mcp", json=listing, headers=session).status_code == 200
        assert sessions() == before + 1  # the engine session the MCP session opened
        assert http.delete("/mcp", headers=session).status_code in (200, 204)
        assert wait_for(lambda: sessions() == before, 10)
        gone = http.post("/mcp", json=listing, headers=session)
        assert gone.status_code == 404


def test_sigterm_after_mcp_use_stops_quietly() -> None:
    """A client's session (and its SDK's event streams) still open at SIGTERM: the service
    stops with status 0 and nothing on stderr but its own lines, no asyncio complaint about a
    task destroyed pending, no traceback."""
    server = ServiceProcess("--token", TOKEN)

    async def scenario() -> None:
        async with _mcp(server) as session:
            assert (await session.list_tools()).tools
            server.process.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(server.process.wait, 60) == 0

    try:
        _run(scenario())
    finally:
        server.stop()
    noise = [line for line in server.stderr if not line.startswith("a2e: ")]
    assert not noise, noise
