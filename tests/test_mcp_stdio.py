"""``a2e serve --mcp`` as a real subprocess, driven by the official MCP SDK's client: what an MCP
host sees (tools, schemas, annotations, results, progress, logs), what it can do to a call
(cancel it), what it cannot (call a denied tool, break out of the sandbox), and what a broken
client gets (a JSON-RPC error, and the session goes on)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psutil
from mcp import Client, ClientSession, StdioServerParameters, stdio_client, types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from a2e.caps.tools._schema import input_schema
from a2e_engine.engine.mcp._server import SEARCH_TOOL
from a2e_engine.tools._python_eval import PythonEval
from tests.guessing_game import BINARY_SEARCH
from tests.mcp_raw import INITIALIZE
from tests.waiting import wait_for
from tests.worker_tree import WorkerTree

SERVE_MCP = ["-m", "a2e_engine.engine.cli", "serve", "--mcp", "--prefork", "1"]
BENCH = "a2e_engine.benchmarks._workloads:BenchTools"
CHECKERS = Path(__file__).parent / "testlib_checkers"


@asynccontextmanager
async def _mcp(*flags: str) -> AsyncIterator[tuple[ClientSession, WorkerTree, list[Any]]]:
    """An initialized client session with a fresh server; its worker tree; the log messages
    that reach it."""
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    before = {child.pid for child in psutil.Process().children()}
    params = StdioServerParameters(
        command=sys.executable, args=[*SERVE_MCP, *flags], env=dict(os.environ)
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, logging_callback=on_log) as session,
    ):
        await asyncio.wait_for(session.initialize(), 90)
        (server,) = [c for c in psutil.Process().children() if c.pid not in before]
        yield session, WorkerTree(server.pid), logs


def _run(scenario: Any) -> Any:
    return asyncio.run(asyncio.wait_for(scenario, 180))


def test_an_mcp_host_sees_the_engines_tools_and_their_results(tmp_path: Path) -> None:
    config = tmp_path / "a2e.toml"
    config.write_text('[policy]\ndeny = ["run_shell"]\n')

    async def scenario() -> None:
        async with _mcp("--plugin", BENCH, "--config", str(config)) as (session, _, logs):
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert "run_shell" not in listed, "a denied tool is not offered"
            python_eval, *_ = PythonEval()._list_tools()
            assert listed["python_eval"].input_schema == input_schema(python_eval)
            assert listed["python_eval"].description == python_eval.description
            assert listed["read_file"].annotations is not None
            assert listed["read_file"].annotations.read_only_hint is True
            assert listed["http_request"].annotations.open_world_hint is True  # type: ignore[union-attr]
            assert listed["python_eval"].annotations.open_world_hint is False  # type: ignore[union-attr]
            assert listed["code_eval"].annotations.idempotent_hint is True  # type: ignore[union-attr]

            code = "for i in range(300):\n    print('line', i)\n6 * 7"
            result = await session.call_tool("python_eval", {"code": code})
            assert not result.is_error and result.structured_content is not None
            assert result.structured_content["value"] == 42
            stdout = "".join(f"line {i}\n" for i in range(300))
            assert json.loads(result.content[0].text)["stdout"] == stdout  # type: ignore[union-attr]
            # The output streamed as log messages, each burst's chunks joined into one.
            streamed = [log.data for log in logs if log.logger == "python_eval/stdout"]
            assert "".join(streamed) == stdout and len(streamed) < 300

            # A stateful tool: the MCP session's cells share one interpreter.
            await session.call_tool("python_session", {"code": "kept = 6 * 7"})
            again = await session.call_tool("python_session", {"code": "kept"})
            assert again.structured_content is not None
            assert again.structured_content["display"] == [{"text/plain": "42"}]

            graded = await session.call_tool(
                "code_eval",
                {
                    "program": "def add(a, b):\n    return a + b\n",
                    "tests": "def check(f):\n    assert f(2, 3) == 5\n",
                    "entry_point": "add",
                },
            )
            assert not graded.is_error and graded.structured_content["verdict"] == "passed"  # type: ignore[index]
            interactive = await session.call_tool(
                "code_eval",
                {
                    "program": BINARY_SEARCH,
                    "test_cases": [{"input": "99", "output": ""}],
                    "interactor": {"source": (CHECKERS / "guess_interactor.cpp").read_text()},
                    "cpu_time_limit": 2,
                },
            )
            assert not interactive.is_error, interactive.content
            assert interactive.structured_content["verdict"] == "AC"  # type: ignore[index]

            seen: list[tuple[float, float | None, str | None]] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                seen.append((progress, total, message))

            emitted = await session.call_tool("emit_events", {}, progress_callback=on_progress)
            assert not emitted.is_error
            # Each burst's last progress: growing, and ending where the tool's events end.
            assert seen and seen[-1] == (99.0, 100.0, "event 99")
            assert all(a[0] < b[0] for a, b in itertools.pairwise(seen))
            assert all(message == f"event {int(value)}" for value, _, message in seen)

            wrong = await session.call_tool("python_eval", {"source": "1"})
            assert wrong.is_error and "missing required argument 'code'" in wrong.content[0].text  # type: ignore[union-attr]
            denied = await session.call_tool("run_shell", {"command": "id"})
            assert denied.is_error and denied.structured_content is not None
            assert denied.structured_content["error_code"] == "tool_denied"
            assert denied.structured_content["reason"] == "policy_denied"
            assert denied.content[0].text.startswith("policy_denied: ")  # type: ignore[union-attr]
            unknown = await session.call_tool("no_such_tool", {})
            assert unknown.is_error and "no_such_tool" in unknown.content[0].text  # type: ignore[union-attr]
            assert unknown.structured_content == {
                "error_code": "unknown_tool",
                "reason": "unknown_tool",
                "error": unknown.structured_content["error"],  # type: ignore[index]
            }
            failed = await session.call_tool("python_eval", {"code": "1 / 0"})
            assert failed.is_error and failed.structured_content is not None
            assert failed.structured_content["reason"] == "tool_failed"
            assert failed.structured_content["error_code"] == "tool_error"

    _run(scenario())


def test_a_client_of_the_2026_protocol_is_served_too() -> None:
    """No handshake and no session: each request carries its own envelope, and asks for log
    messages itself."""
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def scenario() -> None:
        params = StdioServerParameters(command=sys.executable, args=SERVE_MCP, env=dict(os.environ))
        async with Client(params, mode="auto", log_level="info", logging_callback=on_log) as client:
            assert client.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
            assert "python_eval" in {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("python_eval", {"code": "print('modern')\n6 * 7"})
            assert not result.is_error and result.structured_content["value"] == 42  # type: ignore[index]
            assert [log.data for log in logs if log.logger == "python_eval/stdout"] == ["modern\n"]

    _run(scenario())


def test_deferred_tools_are_found_by_search_and_called_by_name() -> None:
    async def scenario() -> None:
        async with _mcp("--plugin", "tests.cli_plugins:DeferredHelpers") as (session, _, logs):
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert "convert_units" not in names and SEARCH_TOOL in names
            found = await session.call_tool(SEARCH_TOOL, {"query": "metres to feet"})
            assert not found.is_error and found.structured_content is not None
            (tool, *_) = found.structured_content["tools"]
            assert tool["name"] == "convert_units" and tool["inputSchema"]["type"] == "object"
            seen: list[tuple[float, str | None]] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                seen.append((progress, message))

            result = await session.call_tool("convert_units", {}, progress_callback=on_progress)
            assert result.structured_content == {"feet_per_metre": 3.28084}
            assert seen == [(100.0, "done")]
            said = {(log.level, log.logger, log.data) for log in logs}
            assert ("info", "convert_units/status", "looking up the factor") in said
            assert ("warning", "convert_units", "feet are approximate") in said
            wrong = await session.call_tool(SEARCH_TOOL, {"query": 3})
            assert wrong.is_error and "takes a query" in wrong.content[0].text  # type: ignore[union-attr]
            assert wrong.structured_content is not None
            assert wrong.structured_content["reason"] == "invalid_arguments"

    _run(scenario())


def test_a_cancelled_call_has_its_worker_killed() -> None:
    async def scenario() -> None:
        async with _mcp() as (session, tree, _):
            baseline = await asyncio.to_thread(tree.settled_workers)
            sleeper = {"code": "import time\ntime.sleep(60)"}
            call = asyncio.ensure_future(session.call_tool("python_eval", sleeper))
            assert await asyncio.to_thread(wait_for, lambda: tree.workers() > baseline, 10)
            started = time.monotonic()
            call.cancel()
            await asyncio.gather(call, return_exceptions=True)
            assert await asyncio.to_thread(wait_for, lambda: tree.workers() <= baseline, 10)
            assert time.monotonic() - started < 10
            after = await session.call_tool("python_eval", {"code": "1 + 1"})
            assert not after.is_error and after.structured_content["value"] == 2  # type: ignore[index]

    _run(scenario())


def test_hostile_code_through_mcp_is_contained() -> None:
    attacks: dict[str, tuple[str, dict[str, Any]]] = {
        "an infinite loop": ("python_eval", {"code": "while True:\n    pass"}),
        "a fork bomb": (
            "run_code",
            {"language": "bash", "code": ":(){ :|:& };:", "run_timeout": 2},
        ),
        "reading /etc/shadow": ("python_eval", {"code": "open('/etc/shadow').read()"}),
        "a socket": (
            "python_eval",
            {"code": "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)"},
        ),
    }

    async def scenario() -> dict[str, types.CallToolResult]:
        async with _mcp("--call-timeout-s", "3") as (session, tree, _):
            for tool, arguments in (
                ("python_eval", {"code": "1"}),
                ("run_code", {"language": "bash", "code": "true"}),
            ):
                assert not (await session.call_tool(tool, arguments)).is_error
            waiting = await asyncio.to_thread(tree.settled_workers)  # each profile's, kept warm
            results = {}
            for name, (tool, arguments) in attacks.items():
                results[name] = await session.call_tool(tool, arguments)
            # Nothing any of them started is left: no process beyond the workers kept waiting.
            assert await asyncio.to_thread(tree.settled_workers) <= waiting
            return results

    started = time.monotonic()
    results = _run(scenario())
    assert time.monotonic() - started < 90
    loop = results["an infinite loop"]
    assert loop.is_error and "timed out after 3 s" in loop.content[0].text  # type: ignore[union-attr]
    bomb = results["a fork bomb"]
    assert not bomb.is_error and bomb.structured_content is not None
    assert bomb.structured_content["run_result"]["status"] in ("TimeLimitExceeded", "Finished")
    for name in ("reading /etc/shadow", "a socket"):
        assert results[name].is_error, name
        text = results[name].content[0].text  # type: ignore[union-attr]
        assert "Error" in text, (name, text)


def test_a_line_that_is_not_json_rpc_gets_an_error_and_the_session_goes_on() -> None:
    lines = [
        b"{not json\n",
        b'{"hello": "world"}\n',
        json.dumps(INITIALIZE).encode() + b"\n",
    ]
    proc = subprocess.run(
        [sys.executable, *SERVE_MCP],
        input=b"".join(lines),
        capture_output=True,
        timeout=120,
    )
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert replies[0]["id"] is None and replies[0]["error"]["code"] == -32700
    assert "parse error" in replies[0]["error"]["message"]
    assert replies[1]["id"] is None and replies[1]["error"]["code"] == -32600
    assert replies[2]["id"] == 1 and replies[2]["result"]["serverInfo"]["name"] == "a2e-engine"


def test_calls_in_flight_at_the_end_of_input_are_answered() -> None:
    """A host that writes its requests and closes stdin gets every answer, as over
    ``a2e serve --stdio``, and the server then exits."""
    call = {"name": "python_eval", "arguments": {"code": "import time\ntime.sleep(1)\n6 * 7"}}
    lines = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        {"jsonrpc": "2.0", "id": "last", "method": "tools/list"},
    ]
    proc = subprocess.run(
        [sys.executable, *SERVE_MCP],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    replies = {reply["id"]: reply for reply in map(json.loads, proc.stdout.splitlines())}
    assert set(replies) == {1, 2, "last"}, proc.stdout
    assert replies[2]["result"]["structuredContent"]["value"] == 42, replies[2]
    assert replies["last"]["result"]["tools"]
