"""``a2e serve --stdio``: JSON lines on stdin and stdout, one message per line.

A reader thread parses lines (off the event loop) and hands messages to the connection; a
writer thread owns stdout, so a slow reader on the other side never blocks the engine. Lines
that are not JSON, too long, or not a valid message get an ``error`` reply and the connection
goes on. At end of input the server finishes the calls in flight, writes their replies, then
returns. Logs go to stderr; stdout carries nothing but protocol.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from a2e.codec import MAX_MESSAGE_BYTES, ProtocolError, decode, encode
from a2e.messages import A2EMessage, ErrorCode

if TYPE_CHECKING:
    from engine.engine import Engine

__all__ = ["serve_stdio"]

log = logging.getLogger("a2e.stdio")
_EOF = object()


def _read_lines(
    stream: BinaryIO,
    deliver: Callable[[A2EMessage | ProtocolError], None],
    done: Callable[[], None],
) -> None:
    """Reader thread: one message (or ProtocolError) per line, over-long lines skipped."""
    try:
        while True:
            line = stream.readline(MAX_MESSAGE_BYTES + 1)
            if not line:
                break
            if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
                while True:  # discard the rest of the over-long line
                    rest = stream.readline(1 << 20)
                    if not rest or rest.endswith(b"\n"):
                        break
                deliver(
                    ProtocolError(
                        ErrorCode.MESSAGE_TOO_LARGE,
                        f"line longer than the limit of {MAX_MESSAGE_BYTES} bytes; skipped",
                    )
                )
                continue
            if not line.strip():
                continue
            try:
                deliver(decode(line))
            except ProtocolError as exc:
                deliver(exc)
    except (OSError, ValueError) as exc:
        log.warning("stdin read failed: %s", exc)
    finally:
        done()


def _write_lines(stream: BinaryIO, outbox: queue.SimpleQueue[object]) -> None:
    """Writer thread: the only code that touches stdout."""
    while True:
        item = outbox.get()
        if item is _EOF:
            return
        assert isinstance(item, bytes)
        try:
            stream.write(item)
            if outbox.empty():
                stream.flush()
        except (OSError, ValueError) as exc:  # the reader went away; keep draining
            log.warning("stdout write failed: %s", exc)


async def serve_stdio(
    engine: Engine, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> None:
    """Serve one connection on stdin/stdout until end of input and the last reply."""
    loop = asyncio.get_running_loop()
    stdin = stdin or os.fdopen(0, "rb", closefd=False)
    stdout = stdout or os.fdopen(1, "wb", closefd=False)
    outbox: queue.SimpleQueue[object] = queue.SimpleQueue()
    batch: list[bytes] = []

    def hand_over() -> None:
        if batch:
            outbox.put(b"".join(batch))
            batch.clear()

    def send(message: A2EMessage) -> None:
        # Lines made in one turn of the loop (a burst of a tool's events, read from its pipe at
        # once) reach the writer as one write: one wake-up of the writer thread and of the
        # peer's reader, not one per event. Always on the loop thread.
        line = encode(message).encode() + b"\n"
        if not batch:
            loop.call_soon(hand_over)
        batch.append(line)

    connection = engine.open_connection(send, name="stdio")
    ended = asyncio.Event()
    reader = threading.Thread(
        target=_read_lines,
        args=(
            stdin,
            lambda m: loop.call_soon_threadsafe(connection.receive, m),
            lambda: loop.call_soon_threadsafe(ended.set),
        ),
        name="a2e-stdio-reader",
        daemon=True,
    )
    writer = threading.Thread(
        target=_write_lines, args=(stdout, outbox), name="a2e-stdio-writer", daemon=True
    )
    reader.start()
    writer.start()
    await ended.wait()
    await asyncio.sleep(0)  # messages delivered just before EOF are queued behind us
    in_flight = [call.task for call in connection.calls.values()]
    if in_flight:
        await asyncio.wait(in_flight)
    engine.close_connection(connection)
    hand_over()
    outbox.put(_EOF)
    await loop.run_in_executor(None, writer.join)
