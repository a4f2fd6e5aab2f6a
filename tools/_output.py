"""Output that tools stream and return: events as it is produced, a capped copy for the result.

Every built-in tool that produces text (``python_eval``, ``run_shell``, ...) writes it through an
``EventStream``. What the result carries is capped: the head and the tail of the stream, with a
marker between them, ``truncated: true``, and the whole output saved in the session workspace
(``.a2e/output/<call>-<stream>.txt``, its path in the result) so nothing is lost while the session
lasts. ``a2e call``, whose session ends with the command, copies the file out (``--keep-output``)
or says in the marker that it is gone, reading and rewriting it with ``MARKER`` and ``marker``.
Events stop at the head's size; the supervisor caps them again anyway.
"""

from __future__ import annotations

import _thread
import collections
import io
import os
import re
import threading
import time
from typing import IO, Any

from a2e.caps.tools._plugin import ToolPlugin

__all__ = [
    "MARKER",
    "MAX_STREAM_CHARS",
    "SPOOL_DIR",
    "CappedText",
    "EventStream",
    "Flusher",
    "marker",
    "results_of",
    "saved_in",
]

MAX_STREAM_CHARS = 1_000_000
SPOOL_DIR = os.path.join(".a2e", "output")

#: A capped stream's marker, as ``marker`` writes it: how much was left out of which stream, and
#: where the whole of it is, if it was saved.
MARKER = re.compile(
    r"\[\.\.\. (?P<omitted>\d+) characters of (?P<name>[^\s\]]+) omitted"
    r"(?:; (?P<where>[^\n]*?))? \.\.\.\]"
)
_SAVED_IN = "all of it is in "


def marker(omitted: int, name: str, where: str = "", path: str = "") -> str:
    """What stands between a stream's head and its tail; ``path``: the file with all of it
    (``MARKER``'s ``where`` says "all of it is in PATH"), else ``where``, a phrase of its own."""
    if path:
        where = _SAVED_IN + path
    return f"[... {omitted} characters of {name} omitted{'; ' + where if where else ''} ...]"


def saved_in(where: str | None) -> str:
    """The path that a ``MARKER`` match's ``where`` names, or ``""``."""
    return where[len(_SAVED_IN) :] if where and where.startswith(_SAVED_IN) else ""


class CappedText:
    """The head and tail of a text stream, and the whole of it in a file once it outgrows
    ``cap`` characters."""

    def __init__(
        self, name: str, cap: int = MAX_STREAM_CHARS, spool_dir: str = SPOOL_DIR, prefix: str = ""
    ) -> None:
        self.name = name
        self.cap = cap
        self.spool_dir = spool_dir
        self.prefix = prefix or "output"
        self.total = 0
        self._head: list[str] = []
        self._head_chars = 0
        self._tail: collections.deque[str] = collections.deque()
        self._tail_chars = 0
        self._spool: IO[str] | None = None
        self.spool_path = ""
        self.spool_error = ""

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        if not self._tail and self._head_chars + len(text) <= self.cap:
            self._head.append(text)
            self._head_chars += len(text)
            return
        if self._spool is None and not self.spool_error:
            self._start_spool()
        self._write_spool(text)
        room = self.cap // 2 - self._head_chars
        if room > 0:  # the head keeps the start of the stream, however big this piece is
            self._head.append(text[:room])
            self._head_chars += len(text[:room])
            text = text[room:]
        self._tail.append(text)
        self._tail_chars += len(text)
        self._rebalance()

    def _rebalance(self) -> None:
        """Once over the cap: keep at most half of it at each end."""
        half = self.cap // 2
        while self._head_chars > half:
            piece = self._head.pop()
            keep = max(0, len(piece) - (self._head_chars - half))
            self._head_chars -= len(piece) - keep
            if keep:
                self._head.append(piece[:keep])
            self._tail.appendleft(piece[keep:])
            self._tail_chars += len(piece) - keep
        while self._tail_chars > half:
            piece = self._tail.popleft()
            extra = self._tail_chars - half
            if len(piece) > extra:
                self._tail.appendleft(piece[extra:])
                self._tail_chars -= extra
            else:
                self._tail_chars -= len(piece)

    def _start_spool(self) -> None:
        try:
            os.makedirs(self.spool_dir, exist_ok=True)
            path = os.path.join(self.spool_dir, f"{self.prefix}-{self.name}.txt")
            self._spool = open(path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
            self.spool_path = os.path.abspath(path)
            self._spool.write("".join(self._head))
            self._spool.write("".join(self._tail))
        except OSError as exc:
            self.spool_error = f"the full output could not be saved: {exc.strerror or exc}"

    def _write_spool(self, text: str) -> None:
        if self._spool is None:
            return
        try:
            self._spool.write(text)
        except OSError as exc:
            self.spool_error = f"the full output was cut short: {exc.strerror or exc}"
            self._close_spool()

    def _flush_spool(self) -> None:
        if self._spool is None:
            return
        try:
            self._spool.flush()
        except OSError as exc:
            self.spool_error = f"the full output was cut short: {exc.strerror or exc}"
            self._close_spool()

    def _close_spool(self) -> None:
        if self._spool is not None:
            try:
                self._spool.close()
            except OSError:
                pass
            self._spool = None

    def value(self) -> str:
        head = "".join(self._head)
        if not self.truncated:
            return head
        # The marker names the file: whoever reads it once the result is out (run_code's
        # result, in SandboxFusion's shape, never calls report()) must find all of it there.
        self._flush_spool()
        omitted = self.total - self._head_chars - self._tail_chars
        tail = "".join(self._tail)
        return f"{head}\n{marker(omitted, self.name, path=self.spool_path)}\n{tail}"

    def report(self) -> dict[str, Any]:
        """What the result says about this stream beyond its text."""
        self._close_spool()
        facts: dict[str, Any] = {}
        if self.spool_path:
            facts[f"{self.name}_path"] = self.spool_path
        if self.spool_error:
            facts[f"{self.name}_note"] = self.spool_error
        return facts


class EventStream(io.TextIOBase):
    """A text stream that forwards what is written as ``artifact`` events and keeps a capped
    copy (``CappedText``).

    Streaming calls get one event per line. Otherwise lines are coalesced and ``Flusher``
    sends what is pending every ``Flusher.INTERVAL_S``, so output written just before the code
    hangs still leaves the worker before the deadline kills it.
    """

    def __init__(self, plugin: ToolPlugin, name: str, line_by_line: bool) -> None:
        self.plugin = plugin
        self.name = name
        self.line_by_line = line_by_line
        context = plugin.context
        spool_dir = os.path.join(context.workspace, SPOOL_DIR) if context else SPOOL_DIR
        self.kept = CappedText(name, spool_dir=spool_dir, prefix=context.call_id if context else "")
        self._emitted = 0
        self._pending: list[str] = []
        self._pending_chars = 0
        self._lock = threading.RLock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text:
            return 0
        with self._lock:
            self.kept.add(text)
            room = self.kept.cap // 2 - self._emitted
            if room > 0:
                piece = text[:room]
                self._emitted += len(piece)
                self._pending.append(piece)
                self._pending_chars += len(piece)
                if (self.line_by_line and "\n" in piece) or self._pending_chars > 65536:
                    self.flush()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if not self._pending:
                return
            chunk = "".join(self._pending)
            self._pending.clear()
            self._pending_chars = 0
            self.plugin.emit(
                "artifact",
                {"name": self.name, "mime": "text/plain", "chunk": chunk, "final": False},
            )

    def getvalue(self) -> str:
        return self.kept.value()

    @property
    def truncated(self) -> bool:
        return self.kept.truncated


class Flusher:
    """Flushes streams periodically. Start it before user code runs: a memory bomb that later
    makes thread creation fail must not take the error reporting down with it.

    A bare ``_thread`` thread, not a ``threading.Thread``: in a freshly forked worker the
    ``threading`` machinery (the thread's object, its events and conditions, the registry of
    threads) touches enough of the zygote's memory that the copy-on-write faults cost about
    1 ms of CPU per call, twice what the thread itself costs."""

    INTERVAL_S = 0.1

    def __init__(self, *streams: EventStream) -> None:
        self.streams = streams
        self.stopped = False
        self._next_tick = time.monotonic() + self.INTERVAL_S

    def start(self) -> None:
        _thread.start_new_thread(self._run, ())

    def tick(self) -> None:
        """Flush if ``INTERVAL_S`` has passed since the last tick's flush: for a caller that
        wakes often anyway (a loop watching a child), in place of ``start``'s thread."""
        now = time.monotonic()
        if now >= self._next_tick:
            self._next_tick = now + self.INTERVAL_S
            for stream in self.streams:
                stream.flush()

    def _run(self) -> None:
        while not self.stopped:
            time.sleep(self.INTERVAL_S)
            if not self.stopped:
                for stream in self.streams:
                    stream.flush()

    def stop(self) -> None:
        """Flush what is left; the thread ends at its next tick (the worker exits first)."""
        self.stopped = True
        for stream in self.streams:
            stream.flush()


def results_of(*streams: EventStream) -> dict[str, Any]:
    """The result fields for ``streams``: their text, ``truncated``, where the rest went."""
    result: dict[str, Any] = {stream.name: stream.getvalue() for stream in streams}
    for stream in streams:
        result.update(stream.kept.report())
    if any(stream.truncated for stream in streams):
        result["truncated"] = True
    return result
