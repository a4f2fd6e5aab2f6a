"""Reading one worker's result pipe on the event loop, with every cap enforced as bytes arrive.

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

from a2e_engine.sandbox.frames import FrameDecoder, FrameError
from a2e_engine.sandbox.handle import WorkerHandle

__all__ = ["EventSink", "OutputCaps", "ResultReader"]

log = logging.getLogger("a2e.sandbox")

EventSink = Callable[[str, dict[str, Any]], None]

#: Events past the cap are dropped; this many times the cap more and the worker is killed.
EVENT_FLOOD_FACTOR = 10


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
        self.result: dict[str, Any] | None = None
        self.setup_error: str | None = None
        self.violation: str | None = None
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
                f"the worker wrote more than {self.config.max_output_bytes} bytes of output"
            )
        try:
            frames = self.decoder.feed(data)
        except FrameError as exc:
            return self._violate(f"the worker wrote an invalid frame: {exc}")
        for frame in frames:
            self._frame(frame)
            if self.violation is not None:
                return

    def _frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("t")
        if self.result is not None or self.setup_error is not None:
            return self._violate("the worker wrote a frame after its result")
        if kind == "event":
            if self.events >= self.config.max_events:
                self.dropped += 1
                self.decoder.skip_events = True
                if self.dropped > EVENT_FLOOD_FACTOR * self.config.max_events:
                    return self._violate(
                        f"the worker wrote more than {EVENT_FLOOD_FACTOR + 1} times the "
                        f"{self.config.max_events}-event cap"
                    )
                return
            self.events += 1
            event_kind, data = frame.get("kind"), frame.get("data")
            if not isinstance(event_kind, str) or not isinstance(data, dict):
                return self._violate("the worker wrote an event frame without kind and data")
            try:
                self.on_event(event_kind, data)
            except ValueError as exc:
                return self._violate(f"the worker wrote an invalid event: {exc}")
        elif kind == "result":
            ok = frame.get("ok")
            if ok is True or (ok is False and isinstance(frame.get("error"), str)):
                # Not finished yet: only end of stream proves no (forged or genuine) second
                # result follows; the worker closes its end right after its result.
                self.result = frame
            else:
                self._violate("the worker wrote a malformed result frame")
        elif kind == "setup_error" and isinstance(frame.get("error"), str):
            self.setup_error = frame["error"]
        else:
            self._violate(f"the worker wrote a frame of unknown type {str(kind)[:40]!r}")

    def _violate(self, reason: str) -> None:
        self.violation = reason
        self.stop()
        self._finish()

    def drain(self) -> None:
        """After the worker died: read what is left (every writer is gone, so this ends)."""
        if self.eof or self.violation is not None:
            return
        self.on_readable(budget=self.config.max_output_bytes)
