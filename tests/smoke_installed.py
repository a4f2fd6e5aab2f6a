"""A smoke test of an installed ``a2e``, as a user first touches it: every front-end started from
the command a wheel installed, and driven by the real clients (the A2E client over stdio and
WebSocket, httpx, the MCP SDK's client over stdio and Streamable HTTP).

``.ci/test`` runs it with the test environment's Python (which has the clients) against the
``a2e`` of a second virtual environment that holds the wheel and its declared dependencies
alone, so that a module the wheel lacks, or a dependency it does not declare, fails here::

    python tests/smoke_installed.py --a2e /path/to/venv/bin/a2e

Run by its path, not as a module of ``tests``: nothing of a checkout is then importable. Prints
one line per front-end; the first failure is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from a2e._client import A2EClient
from a2e.caps.tools._client import ToolAPI
from a2e.transports import StdioTransport, WebSocketTransport

TOKEN = "smoke-test-token"
#: What no front-end may print on a clean start and stop.
NOISE = ("Traceback", "ERROR", "Task was destroyed", "CancelledError")


class SmokeFailed(Exception):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SmokeFailed(what)


def run(
    command: list[str], timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    check(
        proc.returncode == 0,
        f"{' '.join(command[1:3])}: exit {proc.returncode}: {proc.stderr[-500:]}",
    )
    return proc


def quiet(stderr: str, what: str) -> None:
    noisy = [line for line in stderr.splitlines() if any(word in line for word in NOISE)]
    check(not noisy, f"{what} printed {noisy[:3]}")


def cli(a2e: str) -> str:
    listed = json.loads(run([a2e, "list", "--json"]).stdout)
    names = {tool["name"] for tool in listed}
    check({"python_eval", "run_code", "code_eval"} <= names, f"a2e list: {sorted(names)}")
    called = json.loads(run([a2e, "call", "python_eval", "--arg", "code=6 * 7"]).stdout)
    check(called["success"] and called["data"]["value"] == 42, f"a2e call: {called}")
    run([a2e, "eval", "--help"])
    run([a2e, "doctor"])
    return f"list ({len(names)} tools), call, eval --help, doctor"


def demo(a2e: str) -> str:
    out = run([a2e, "demo", "--prefork", "1"], timeout=300).stdout
    check("calls/s" in out, f"a2e demo printed no throughput: {out[-300:]}")
    return out.strip().splitlines()[-1]


def stdio(a2e: str) -> str:
    client = A2EClient(StdioTransport([a2e, "serve", "--stdio", "--prefork", "1"]))
    try:
        result = ToolAPI(client).call(tool_name="python_eval", arguments={"code": "print(6 * 7)"})
    finally:
        client.close()
    check(result.success and result.data["stdout"] == "42\n", f"serve --stdio: {result}")
    return "python_eval over the A2E protocol"


async def _mcp_call(session: ClientSession, where: str) -> int:
    """initialize, tools/list and a tools/call; the number of tools listed."""
    await session.initialize()
    tools = (await session.list_tools()).tools
    result = await session.call_tool("python_eval", {"code": "6 * 7"})
    content = result.structured_content or {}
    check(not result.is_error and content.get("value") == 42, f"{where}: {result}")
    return len(tools)


async def _mcp_stdio(a2e: str) -> int:
    params = StdioServerParameters(command=a2e, args=["serve", "--mcp", "--prefork", "1"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        return await _mcp_call(session, "serve --mcp")


def mcp_stdio(a2e: str) -> str:
    count = asyncio.run(asyncio.wait_for(_mcp_stdio(a2e), 120))
    return f"initialize, tools/list ({count} tools), tools/call"


async def _mcp_http(url: str) -> int:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        return await _mcp_call(session, "/mcp")


def http(a2e: str) -> str:
    server = subprocess.Popen(
        [a2e, "serve", "--http", "127.0.0.1:0", "--token", TOKEN, "--prefork", "1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stderr is not None
    try:
        url = ""
        started = time.monotonic()
        while not url and time.monotonic() - started < 120:
            line = server.stderr.readline()
            check(bool(line), "serve --http ended before it served")
            if line.startswith("a2e: serving on "):
                url = line.split()[3]
        check(bool(url), "serve --http did not say where it serves")
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        ) as rest:
            listed = rest.get("/v1/tools").json()["tools"]
            called = rest.post("/v1/tools/python_eval", json={"arguments": {"code": "6 * 7"}})
            check(called.status_code == 200 and called.json()["data"]["value"] == 42,
                  f"REST: {called.status_code} {called.text[:300]}")  # fmt: skip
            ran = rest.post("/run_code", json={"code": "print(6 * 7)", "language": "python"}).json()
            check(
                ran["status"] == "Success" and ran["run_result"]["stdout"] == "42\n",
                f"/run_code: {ran}",
            )
            check(rest.get("/openapi.json").status_code == 200, "/openapi.json")
        client = A2EClient(WebSocketTransport(url.replace("http", "ws", 1) + "/a2e", token=TOKEN))
        try:
            over_ws = ToolAPI(client).call(tool_name="python_eval", arguments={"code": "6 * 7"})
        finally:
            client.close()
        check(over_ws.success and over_ws.data["value"] == 42, f"WebSocket: {over_ws}")
        count = asyncio.run(asyncio.wait_for(_mcp_http(url), 120))
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
        check(server.returncode == 0, f"serve --http exited {server.returncode} on SIGTERM")
        quiet(stderr, "serve --http, stopping")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return f"REST ({len(listed)} tools, a call), /run_code, /openapi.json, /a2e, /mcp ({count} tools), SIGTERM"


def ray_engine(a2e: str) -> str:
    python = str(Path(a2e).with_name("python"))
    code = "from a2e_engine.engine import RayEngine; print(RayEngine.__module__)"
    return "RayEngine from " + run([python, "-c", code]).stdout.strip()


STEPS: list[tuple[str, Callable[[str], str]]] = [
    ("a2e", cli),
    ("a2e demo", demo),
    ("a2e serve --stdio", stdio),
    ("a2e serve --mcp", mcp_stdio),
    ("a2e serve --http", http),
    ("import", ray_engine),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a2e", required=True, help="the installed a2e command to try")
    a2e = parser.parse_args().a2e
    os.chdir(os.path.dirname(os.path.abspath(a2e)))  # nowhere near a checkout
    for name, step in STEPS:
        started = time.monotonic()
        try:
            said = step(a2e)
        except (SmokeFailed, OSError, subprocess.SubprocessError, httpx.HTTPError) as exc:
            print(f"smoke: {name}: FAILED: {exc}", file=sys.stderr)
            return 1
        print(f"smoke: {name}: ok in {time.monotonic() - started:.1f} s: {said}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
