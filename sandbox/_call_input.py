"""A running call's input: bytes its tool reads after it started (a command's stdin that an
agent types into, E2B's ``SendInput``), and their end.

Supervisor side, ``CallInput``: the caller holds it and ``send``s pieces and ``end``s them,
from the host's loop; the pool ``attach``es the call's worker once its job is written. The
job of a call that takes input (``Job.input``) leaves the job pipe open, and each piece goes
down it as a frame ``{"input": "<base64>"}``, the end as ``{"end": true}`` (then the pipe is
closed). The supervisor never waits on the worker: what it has not read yet waits here, up to
``MAX_PENDING_BYTES``, and past that ``send`` refuses (the command is not reading its input).
A worker that is gone takes nothing more: ``send`` refuses too.

Worker side, ``reader``: the next piece as it comes, ``None`` at the end (or when the pipe
breaks). Frames that do not read as input end it: the supervisor wrote them, but the bytes
in between are the pipe's.
"""

from __future__ import annotations

import base64
import binascii
import collections
import errno
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from a2e_engine.sandbox._frames import FrameError, encode_frame, read_frame

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

    from a2e_engine.sandbox._run import WorkerHandle

__all__ = ["MAX_PENDING_BYTES", "CallInput", "InputRefused", "reader"]

#: What may wait for the worker to read it (its frames, base64 and all).
MAX_PENDING_BYTES = 1 << 20
#: One piece, at most (larger ones are sent as several).
PIECE_BYTES = 1 << 16


class InputRefused(Exception):
    """The call takes no more input: ended, gone, or not reading what it was sent."""


class CallInput:
    """The input of one call, from the supervisor's side; every method on the host's loop."""

    def __init__(self) -> None:
        self._pending: collections.deque[memoryview] = collections.deque()
        self._pending_bytes = 0
        self._ending = False  # end() was called: the end frame follows what is pending
        self._gone = False  # the worker is gone, or the pipe closed
        self._worker: WorkerHandle | None = None
        self._writing = False

    def send(self, data: bytes) -> None:
        """``data`` for the tool to read, after what was sent before; ``InputRefused`` once
        ended, once the worker is gone, or past ``MAX_PENDING_BYTES`` not read yet."""
        if self._ending:
            raise InputRefused("its input was closed")
        if self._gone:
            raise InputRefused("it is not running")
        frames = [
            encode_frame({"input": base64.b64encode(data[at : at + PIECE_BYTES]).decode()})
            for at in range(0, len(data), PIECE_BYTES)
        ]
        if self._pending_bytes + sum(map(len, frames)) > MAX_PENDING_BYTES:
            raise InputRefused(
                f"it has not read the {self._pending_bytes} bytes it was sent already"
            )
        for frame in frames:
            self._queue(frame)
        self._flush()

    def end(self) -> None:
        """No more input: the tool reads its end once it read the rest (idempotent)."""
        if self._ending or self._gone:
            return
        self._ending = True
        self._queue(encode_frame({"end": True}))
        self._flush()

    # -- the pool's side --

    def attach(self, worker: WorkerHandle) -> None:
        """The call's worker, its job written: what waits goes to it now."""
        self._worker = worker
        self._flush()

    def detach(self) -> None:
        """The run is over: nothing more goes anywhere."""
        worker, self._worker = self._worker, None
        self._gone = True
        self._pending.clear()
        self._pending_bytes = 0
        if worker is not None and self._writing and worker.job_fd >= 0:
            _loop().remove_writer(worker.job_fd)
        self._writing = False

    def _queue(self, frame: bytes) -> None:
        self._pending.append(memoryview(frame))
        self._pending_bytes += len(frame)

    def _flush(self) -> None:
        """Write what the pipe takes now; wait for it to take more otherwise."""
        worker = self._worker
        if worker is None or worker.job_fd < 0:
            return
        while self._pending:
            head = self._pending[0]
            try:
                written = os.write(worker.job_fd, head)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno not in (errno.EPIPE, errno.EBADF):
                    raise
                self.detach()  # the worker closed its end: it reads nothing more
                return
            self._pending_bytes -= written
            if written < len(head):
                self._pending[0] = head[written:]
                break
            self._pending.popleft()
        loop = _loop()
        if self._pending and not self._writing:
            loop.add_writer(worker.job_fd, self._flush)
            self._writing = True
        elif not self._pending and self._writing:
            loop.remove_writer(worker.job_fd)
            self._writing = False
        if not self._pending and self._ending:
            os.close(worker.job_fd)  # the end is written: the worker reads EOF after it
            worker.job_fd = -1
            self._gone = True


def _loop() -> AbstractEventLoop:
    """The supervisor's loop. ``asyncio`` is imported here, on the supervisor's side alone:
    the worker's runtime imports this module for ``reader``, and ``asyncio`` would bring
    ``ssl`` and more into every zygote (``tests/test_plugin_isolation.py``)."""
    import asyncio

    return asyncio.get_running_loop()


def reader(fd: int, max_frame: int) -> Callable[[], bytes | None]:
    """In the worker: the call's input from the job pipe, a piece at a time (blocking),
    ``None`` at its end."""
    ended = False

    def next_piece() -> bytes | None:
        nonlocal ended
        if ended:
            return None
        try:
            frame = read_frame(fd, max_frame)
            piece = frame.get("input")
            if isinstance(piece, str):
                return base64.b64decode(piece, validate=True)
        except (EOFError, OSError, FrameError, ValueError, binascii.Error):
            pass
        ended = True
        return None

    return next_piece
