"""The progress line on stderr: done / total, how many passed so far, the rate and the time
left. Redrawn in place on a terminal; elsewhere (a CI log, a file) a line every ten seconds and
one at the end."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

__all__ = ["Progress"]

_LOG_EVERY_S = 10.0


class Progress:
    def __init__(self, total: int, already: int, passed: int, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.total, self.done, self.passed = total, already, passed
        self.fresh = 0  # graded by this run: what the rate is of
        self.started = time.monotonic()
        self._last_log = 0.0
        self._lock = threading.Lock()
        self._tty = self.out.isatty()

    def add(self, passed: bool) -> None:
        with self._lock:
            self.done += 1
            self.fresh += 1
            self.passed += passed
            now = time.monotonic()
            if self._tty or now - self._last_log >= _LOG_EVERY_S:
                self._last_log = now
                self._show(now)

    def finish(self) -> None:
        with self._lock:
            self._show(time.monotonic())
            if self._tty:
                self.out.write("\n")
            self.out.flush()

    def line(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.fresh / elapsed
        left = self.total - self.done
        eta = _clock(left / rate) if rate > 0 else "?"
        share = f"{100 * self.passed / self.done:.1f}%" if self.done else "-"
        return (
            f"{self.done}/{self.total} graded, {self.passed} passed ({share}), "
            f"{rate:.1f}/s, {left} left, ETA {eta}"
        )

    def _show(self, now: float) -> None:
        text = self.line(now)
        self.out.write(f"\r{text}\x1b[K" if self._tty else text + "\n")
        self.out.flush()


def _clock(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
