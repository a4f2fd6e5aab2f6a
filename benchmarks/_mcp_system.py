"""The engine behind ``a2e serve --mcp``, called by the official MCP SDK's client, as a
benchmark system.

The bench calls from threads; the SDK's client is asyncio. One session is held open on a loop
thread of its own, and each call is handed to it. A streaming call's progress must reach the
tool's last event; the server sends each burst's last progress (``engine.mcp._events``), as a
host shows it, not one notification per event.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import psutil

from a2e_engine.benchmarks._calling import BENCH_ENGINE_FLAGS, Opened, next_payload
from a2e_engine.benchmarks._shared_servers import kept
from a2e_engine.benchmarks._workloads import EVENTS_PER_STREAM, Payload, Workload

__all__ = ["engine_mcp"]


@contextlib.contextmanager
def engine_mcp(workload: Workload, payloads: list[Payload]) -> Iterator[Any]:

    with kept("mcp", _mcp_server) as (loop, session, server):
        take = next_payload(payloads)

        async def one(payload: Payload) -> tuple[Any, list[float]]:
            seen: list[float] = []

            async def count(progress: float, total: float | None, message: str | None) -> None:
                seen.append(progress)

            result = await session.call_tool(
                payload.tool,
                payload.arguments,
                read_timeout_seconds=60,
                progress_callback=count if payload.streaming else None,
            )
            return result, seen

        def call() -> tuple[int, Any]:
            index, payload = take()
            result, seen = asyncio.run_coroutine_threadsafe(one(payload), loop).result(90)
            if result.is_error:
                raise RuntimeError(f"the engine failed {payload.tool}: {result.content}")
            if payload.streaming and (not seen or seen[-1] != EVENTS_PER_STREAM - 1):
                raise RuntimeError(f"progress ended at {seen[-1:]}, not {EVENTS_PER_STREAM - 1}")
            return index, workload.engine_answer(result.structured_content)

        yield Opened(call, lambda: {"supervisor": [server]})


@contextlib.contextmanager
def _mcp_server() -> Iterator[tuple[asyncio.AbstractEventLoop, Any, int]]:
    """``a2e serve --mcp`` with one SDK client session held open on a loop thread: the loop,
    the session and the server's pid."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="bench-mcp", daemon=True)
    thread.start()
    opened: concurrent.futures.Future[ClientSession] = concurrent.futures.Future()
    stop = asyncio.Event()
    before = {child.pid for child in psutil.Process().children()}
    command = ["-m", "a2e_engine.engine.cli", "serve", "--mcp", *BENCH_ENGINE_FLAGS]
    params = StdioServerParameters(command=sys.executable, args=command, env=dict(os.environ))

    async def hold() -> None:
        with open(os.devnull, "w") as quiet:
            try:
                async with (
                    stdio_client(params, errlog=quiet) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    await session.list_tools()  # once, not before the first call
                    opened.set_result(session)
                    await stop.wait()
            except BaseException as exc:
                if not opened.done():
                    opened.set_exception(exc)
                raise

    held = asyncio.run_coroutine_threadsafe(hold(), loop)
    try:
        session = opened.result(120)
        (server,) = [c.pid for c in psutil.Process().children() if c.pid not in before]
        yield loop, session, server
    finally:
        loop.call_soon_threadsafe(stop.set)
        with contextlib.suppress(BaseException):
            held.result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
