"""``a2e serve --stdio``: JSON lines on stdin and stdout, one message per line.

The engine's loop reads stdin and writes stdout itself where they are pipes, else threads do
(``engine.transports._lines``); nothing a slow peer does blocks the engine. Lines that are not
JSON, too long, or not a valid message get an ``error`` reply and the connection goes on. At end
of input the server finishes the calls in flight, writes their replies, then returns. Logs go
to stderr; stdout carries nothing but protocol.
"""

from __future__ import annotations

import asyncio
import os
from typing import BinaryIO

from a2e._codec import MAX_MESSAGE_BYTES, ProtocolError, decode, encode
from a2e._messages import A2EMessage, ErrorCode
from a2e_engine.engine._host import Host
from a2e_engine.engine.transports._lines import (
    give_back_blocking,
    loop_can_watch,
    open_writer,
    read_lines,
)

__all__ = ["serve_stdio"]


async def serve_stdio(
    host: Host, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> None:
    """Serve one connection on stdin/stdout until end of input and the last reply. Runs on
    the host's event loop (where ``send`` is called)."""
    loop = asyncio.get_running_loop()
    stdin = stdin or os.fdopen(0, "rb", closefd=False)
    stdout = stdout or os.fdopen(1, "wb", closefd=False)
    pipes = [stream.fileno() for stream in (stdin, stdout) if loop_can_watch(stream)]
    writer = await open_writer(stdout)
    batch: list[bytes] = []

    def hand_over() -> None:
        if batch:
            writer.write(b"".join(batch))
            batch.clear()

    def send(message: A2EMessage) -> None:
        # Lines made in one turn of the loop (a burst of a tool's events, read from its pipe at
        # once) go out as one write: one wake-up of the peer's reader, not one per event.
        # Always on the loop thread.
        line = encode(message).encode() + b"\n"
        if not batch:
            loop.call_soon(hand_over)
        batch.append(line)

    connection = host.open_connection(send, name="stdio")
    ended = asyncio.Event()

    def on_line(line: bytes) -> None:
        try:
            message: A2EMessage | ProtocolError = decode(line)
        except ProtocolError as exc:
            message = exc
        connection.receive(message)

    def on_too_long() -> None:
        connection.receive(
            ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"line longer than the limit of {MAX_MESSAGE_BYTES} bytes; skipped",
            )
        )

    await read_lines(stdin, MAX_MESSAGE_BYTES, on_line, on_too_long, ended.set)
    await ended.wait()
    await asyncio.wrap_future(connection.finish())
    hand_over()
    await writer.close()
    give_back_blocking(pipes)
