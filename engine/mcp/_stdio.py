"""``a2e serve --mcp``: the engine's tools over MCP's stdio transport.

The process is one MCP session, and so one engine session (one workspace, one uid), opened
with the first request and ended when the client closes stdin.

The lines come and go through the engine's own stdio pipes (``engine.transports._lines``), on
the engine's loop, where the SDK's server runs too: the SDK's stdio transport hands every line
in and every line out to a thread, twice per message, which for a streaming call's hundred
progress notifications cost more than the calls. What the server sends in one turn of the loop
goes out in one write. A line that is not a JSON-RPC message is answered at once (the SDK's
transport dropped it without a word, and the client would wait for ever): not JSON gets
-32700, anything else -32600; either way the session goes on. At the end of input the requests
still unanswered are answered first, then the server ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from a2e._codec import MAX_MESSAGE_BYTES
from a2e.caps.tools._models import DEFAULT_TIMEOUT_S
from a2e_engine.engine._host import Host, HostSession
from a2e_engine.engine._version import engine_version
from a2e_engine.engine.mcp._server import build_server
from a2e_engine.engine.mcp._sessions import LazySession
from a2e_engine.engine.transports._lines import (
    LineWriter,
    give_back_blocking,
    loop_can_watch,
    open_writer,
    read_lines,
)

__all__ = ["serve_mcp_stdio"]


async def serve_mcp_stdio(
    host: Host,
    call_timeout_s: float = DEFAULT_TIMEOUT_S,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Serve until the client closes stdin and the last answer is out (on the host's loop)."""
    stdin = stdin or os.fdopen(0, "rb", closefd=False)
    stdout = stdout or os.fdopen(1, "wb", closefd=False)
    pipes = [stream.fileno() for stream in (stdin, stdout) if loop_can_watch(stream)]
    writer = await open_writer(stdout)
    # The client's messages wait for the server unbounded, as A2E's stdio does: the client is
    # the host that started this process.
    inbox_in, inbox = anyio.create_memory_object_stream[SessionMessage | Exception](math.inf)
    outbox, outbox_out = anyio.create_memory_object_stream[SessionMessage](math.inf)

    answering = _Answering(inbox_in.close)

    def on_line(line: bytes) -> None:
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as exc:
            writer.write(_line(_unreadable(exc)))
            return
        if isinstance(message, types.JSONRPCRequest):
            answering.asked(message.id)
        with contextlib.suppress(anyio.BrokenResourceError):  # the server has stopped reading
            inbox_in.send_nowait(SessionMessage(message))

    def on_too_long() -> None:
        error = types.ErrorData(
            code=types.INVALID_REQUEST,
            message=f"line longer than the limit of {MAX_MESSAGE_BYTES} bytes; skipped",
        )
        writer.write(_line(types.JSONRPCError(jsonrpc="2.0", id=None, error=error)))

    session = LazySession(host, "mcp stdio")

    @contextlib.asynccontextmanager
    async def the_session(ctx: ServerRequestContext[Any]) -> AsyncIterator[HostSession]:
        yield await session.get()

    server = build_server(the_session, engine_version(), call_timeout_s)
    sending = asyncio.ensure_future(_send_all(outbox_out, writer, answering))
    try:
        await read_lines(stdin, MAX_MESSAGE_BYTES, on_line, on_too_long, answering.input_ended)
        await server.run(inbox, outbox, server.create_initialization_options())
    finally:
        outbox.close()
        await sending
        session.close()
        await writer.close()
        give_back_blocking(pipes)


class _Answering:
    """The requests not answered yet, and the end of input held back until they are: the SDK's
    server ends with its input and cancels what it is still handling ("Connection closed"),
    whereas a client that closes stdin after its last request still wants the answers (as
    ``a2e serve --stdio`` gives them)."""

    def __init__(self, end_input: Callable[[], None]) -> None:
        self._end_input = end_input
        self._unanswered: set[types.RequestId] = set()
        self._ended = False

    def asked(self, request_id: types.RequestId) -> None:
        self._unanswered.add(request_id)

    def answered(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._unanswered.discard(message.id)
            if self._ended and not self._unanswered:
                self._end_input()

    def input_ended(self) -> None:
        self._ended = True
        if not self._unanswered:
            self._end_input()


async def _send_all(
    messages: MemoryObjectReceiveStream[SessionMessage], writer: LineWriter, answering: _Answering
) -> None:
    """Each message a line; those ready together, one write."""
    async for first in messages:
        batch = [first.message]
        while True:
            try:
                batch.append(messages.receive_nowait().message)
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        writer.write(b"".join(_line(message) for message in batch))
        for message in batch:
            answering.answered(message)


def _line(message: types.JSONRPCMessage | types.JSONRPCError) -> bytes:
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def _unreadable(problem: ValidationError) -> types.JSONRPCError:
    errors = problem.errors()
    if errors and errors[0]["type"] == "json_invalid":
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"parse error: {errors[0]['msg']}")
    else:
        error = types.ErrorData(
            code=types.INVALID_REQUEST, message="invalid request: not a JSON-RPC 2.0 message"
        )
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)
