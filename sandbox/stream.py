"""Layer ``frames``: reading one worker's result pipe on the event loop, with every cap enforced
as bytes arrive.

The worker is hostile: what it writes is checked frame by frame (``sandbox.frames``), counted
against the output and event caps, and the first broken rule ends the stream as a violation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox.frames import SKIPPED_EVENT, FrameDecoder, FrameError, FrameTooLarge
from a2e_engine.sandbox.handle import WorkerHandle
from a2e_engine.sandbox.messages import Event, MalformedMessage, Result, check_worker_frame

__all__ = ["EventSink", "OutputCaps", "ResultReader", "report_frames"]

log = logging.getLogger("a2e.sandbox")

EventSink = Callable[[str, dict[str, Any]], None]

#: Events past the cap are dropped; this many times the cap more and the worker is killed.
EVENT_FLOOD_FACTOR = 10


def report_frames() -> dict[str, dict[str, Any]]:
    """The supervisor applies this layer itself, so it is on wherever the engine runs."""
    return {"frames": {"active": True, "reason": ""}}


@dataclass(frozen=True)
class OutputCaps:
    """What one worker may write: bytes per frame, bytes in all, events."""

    max_frame: int
    max_output_bytes: int
    max_events: int


class ResultReader:
    """Reads one worker's result pipe on the event loop; all caps are enforced here."""

    def __init__(
        self,
        worker: WorkerHandle,
        config: OutputCaps,
        on_event: EventSink,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.worker = worker
        self.config = config
        self.on_event = on_event
        self.decoder = FrameDecoder(config.max_frame)
        self.bytes_read = 0
        self.events = 0
        self.dropped = 0
        self.result: Result | None = None
        self.setup_error: str | None = None
        self.violation: str | None = None
        self.over_limit = False  # the violation broke a cap (size, count), not the protocol
        self.eof = False
        self.unresponsive = False  # ended its stream without a result, then would not exit
        self.finished: asyncio.Future[None] = loop.create_future()  # end of stream or violation
        self.loop = loop
        loop.add_reader(worker.result_fd, self.on_readable)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.worker.result_fd)

    def _finish(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)

    def on_readable(self, budget: int = 1 << 20) -> None:
        while budget > 0 and not self.eof and self.violation is None:
            try:
                data = os.read(self.worker.result_fd, 256 * 1024)
            except BlockingIOError:
                return
            except OSError as exc:
                data = b""
                log.debug("reading worker %d: %s", self.worker.pid, exc)
            if not data:
                self.eof = True
                if self.decoder.pending_bytes:
                    self.violation = "the worker's last frame was cut short"
                self.stop()
                self._finish()
                return
            budget -= len(data)
            self.feed(data)

    def feed(self, data: bytes) -> None:
        self.bytes_read += len(data)
        if self.bytes_read > self.config.max_output_bytes:
            return self._violate(
                f"the worker wrote more than {self.config.max_output_bytes} bytes of output",
                over_limit=True,
            )
        try:
            frames = self.decoder.feed(data)
        except FrameTooLarge as exc:
            return self._violate(f"the worker wrote too large a frame: {exc}", over_limit=True)
        except FrameError as exc:
            return self._violate(f"the worker wrote an invalid frame: {exc}")
        for frame in frames:
            self._frame(frame)
            if self.violation is not None:
                return

    def _frame(self, frame: dict[str, Any]) -> None:
        if self.result is not None or self.setup_error is not None:
            return self._violate("the worker wrote a frame after its result")
        if frame is SKIPPED_EVENT:
            return self._drop_event()
        try:
            said = check_worker_frame(frame)
        except MalformedMessage as exc:
            return self._violate(str(exc))
        if isinstance(said, Event):
            if self.events >= self.config.max_events:
                return self._drop_event()
            self.events += 1
            try:
                self.on_event(said.kind, said.data)
            except ValueError as exc:
                return self._violate(f"the worker wrote an invalid event: {exc}")
        elif isinstance(said, Result):
            # Not finished yet: only end of stream proves no (forged or genuine) second result
            # follows; the worker closes its end right after its result.
            self.result = said
        else:
            self.setup_error = said.error

    def _drop_event(self) -> None:
        """An event past the cap: counted, not read (``FrameDecoder.skip_events``); a flood
        far past it ends the stream."""
        self.dropped += 1
        self.decoder.skip_events = True
        if self.dropped > EVENT_FLOOD_FACTOR * self.config.max_events:
            self._violate(
                f"the worker wrote more than {EVENT_FLOOD_FACTOR + 1} times the "
                f"{self.config.max_events}-event cap",
                over_limit=True,
            )

    def _violate(self, reason: str, over_limit: bool = False) -> None:
        self.violation = reason
        self.over_limit = over_limit
        self.stop()
        self._finish()

    def drain(self) -> None:
        """After the worker died: read what is left (every writer is gone, so this ends)."""
        if self.eof or self.violation is not None:
            return
        self.on_readable(budget=self.config.max_output_bytes)
