"""Lines in from stdin, bytes out to stdout: on the event loop where it can, else in a thread.

Where stdin or stdout is a pipe (a host that started ``a2e serve --stdio`` as its child), the
loop reads and writes it itself, and gives it its blocking mode back when the server is done
(``give_back_blocking``). A line in or a batch of lines out then costs no hand-over to a reader
or writer thread; each such hand-over was a thread wake-up plus a GIL hand-over with the loop,
and with a tool's stream of events it came once per batch. A regular file (``a2e serve --stdio
< calls.jsonl``) cannot be watched by the loop, a terminal must not be left non-blocking for
the shell, and a socket is left to threads too (see ``loop_can_watch``): there a thread does
the blocking I/O.

Either way the same rules hold: one message per line, a line longer than the limit is skipped
and reported once, blank lines are ignored, a last line without a newline still counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import queue
import stat
import threading
from collections.abc import Callable, Iterable
from typing import BinaryIO, Protocol

__all__ = ["LineWriter", "give_back_blocking", "loop_can_watch", "open_writer", "read_lines"]

log = logging.getLogger("a2e.stdio")

OnLine = Callable[[bytes], None]
_EOF = object()


def loop_can_watch(file: BinaryIO) -> bool:
    """True for a pipe: what the loop reads or writes without a thread.

    Not a socket: asyncio's pipe transports take the write side for a one-way channel and
    close it as soon as the fd turns readable, which a socket serving as both stdin and stdout
    (socket activation) does with every request."""
    try:
        mode = os.fstat(file.fileno()).st_mode
    except (OSError, ValueError, io.UnsupportedOperation):  # not backed by an fd (BytesIO)
        return False
    return stat.S_ISFIFO(mode)


class _Splitter:
    """Cuts a byte stream into lines of at most ``limit`` bytes (the newline not counted)."""

    def __init__(self, limit: int, on_line: OnLine, on_too_long: Callable[[], None]) -> None:
        self.limit = limit
        self.on_line = on_line
        self.on_too_long = on_too_long
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False  # inside a line already reported as too long

    def feed(self, data: bytes) -> None:
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                self._keep(data[start:])
                return
            piece, start = data[start:end], end + 1
            if self._skipping:
                self._skipping = False
                continue
            if self._parts:
                piece = b"".join([*self._parts, piece])
                self._parts.clear()
                self._size = 0
            self._line(piece)

    def end(self) -> None:
        """End of input: a last line without its newline is still a line."""
        if self._parts and not self._skipping:
            piece = b"".join(self._parts)
            self._parts.clear()
            self._line(piece)

    def _keep(self, rest: bytes) -> None:
        if self._skipping or not rest:
            return
        self._parts.append(rest)
        self._size += len(rest)
        if self._size > self.limit:
            self._parts.clear()
            self._size = 0
            self._skipping = True
            self.on_too_long()

    def _line(self, piece: bytes) -> None:
        if len(piece) > self.limit:
            self.on_too_long()
        elif piece.strip():
            self.on_line(piece)


class _ReadProtocol(asyncio.Protocol):
    def __init__(self, splitter: _Splitter, on_end: Callable[[], None]) -> None:
        self.splitter = splitter
        self.on_end = on_end
        self.ended = False

    def data_received(self, data: bytes) -> None:
        self.splitter.feed(data)

    def eof_received(self) -> bool:
        self._finish()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.warning("stdin read failed: %s", exc)
        self._finish()

    def _finish(self) -> None:
        if not self.ended:
            self.ended = True
            self.splitter.end()
            self.on_end()


async def read_lines(
    stream: BinaryIO,
    limit: int,
    on_line: OnLine,
    on_too_long: Callable[[], None],
    on_end: Callable[[], None],
) -> None:
    """Start delivering ``stream``'s lines to ``on_line`` on the loop's thread; ``on_end`` once
    at end of input. Returns as soon as reading has started."""
    loop = asyncio.get_running_loop()
    splitter = _Splitter(limit, on_line, on_too_long)
    if loop_can_watch(stream):
        await loop.connect_read_pipe(lambda: _ReadProtocol(splitter, on_end), stream)
        return

    def in_thread() -> None:
        try:
            while True:
                chunk = stream.read1(1 << 16) if hasattr(stream, "read1") else stream.read(1 << 16)
                if not chunk:
                    break
                loop.call_soon_threadsafe(splitter.feed, chunk)
        except (OSError, ValueError) as exc:
            log.warning("stdin read failed: %s", exc)
        finally:
            loop.call_soon_threadsafe(splitter.end)
            loop.call_soon_threadsafe(on_end)

    threading.Thread(target=in_thread, name="a2e-stdio-reader", daemon=True).start()


def give_back_blocking(fds: Iterable[int]) -> None:
    """Once all I/O is done: blocking mode again for the fds the loop made non-blocking
    (``loop_can_watch``; the transports close their file objects, not the fds). The mode
    belongs to the file description, which the process that started us shares."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.set_blocking(fd, True)


class LineWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def close(self) -> None:
        """Everything written reaches the stream (or the stream is gone), then return."""


class _LoopWriter(asyncio.Protocol):
    """Writes at once where the pipe has room; the rest waits in the transport's buffer."""

    def __init__(self) -> None:
        self.transport: asyncio.WriteTransport | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.warning("stdout write failed: %s", exc)
        if not self.lost.done():
            self.lost.set_result(None)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        if not self.transport.is_closing():  # the reader went away: nothing to do
            self.transport.write(data)

    async def close(self) -> None:
        assert self.transport is not None
        self.transport.close()  # after the buffer is flushed
        await self.lost


class _ThreadWriter:
    """A thread owns the stream, so a slow reader on the other side never blocks the loop."""

    def __init__(self, stream: BinaryIO) -> None:
        self.outbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=self._run, args=(stream,), name="a2e-stdio-writer", daemon=True
        )
        self.thread.start()

    def _run(self, stream: BinaryIO) -> None:
        while True:
            item = self.outbox.get()
            if item is _EOF:
                return
            assert isinstance(item, bytes)
            try:
                stream.write(item)
                if self.outbox.empty():
                    stream.flush()
            except (OSError, ValueError) as exc:  # the reader went away; keep draining
                log.warning("stdout write failed: %s", exc)

    def write(self, data: bytes) -> None:
        self.outbox.put(data)

    async def close(self) -> None:
        self.outbox.put(_EOF)
        await asyncio.get_running_loop().run_in_executor(None, self.thread.join)


async def open_writer(stream: BinaryIO) -> LineWriter:
    """A writer for ``stream``: the loop's own where it can watch it, else a thread's."""
    if loop_can_watch(stream):
        loop = asyncio.get_running_loop()
        _, writer = await loop.connect_write_pipe(_LoopWriter, stream)
        return writer
    return _ThreadWriter(stream)
