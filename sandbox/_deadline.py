"""``Deadline``: when a call must be over, made once where the call arrives.

The edge (the host, as it accepts a call) grants the timeout, clamped to the engine's cap, and
makes the deadline; everything after it (queueing for a worker, retries, driving the worker)
reads the same value, and every message about a timeout names the timeout it was given.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

__all__ = ["Deadline"]


@dataclass(frozen=True)
class Deadline:
    """``at`` is in the event loop's clock (``loop.time()``); ``seconds`` the timeout granted."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float, loop: asyncio.AbstractEventLoop | None = None) -> Deadline:
        loop = loop or asyncio.get_running_loop()
        return cls(loop.time() + seconds, seconds)

    def remaining(self, loop: asyncio.AbstractEventLoop | None = None) -> float:
        return self.at - (loop or asyncio.get_running_loop()).time()

    def timed_out(self, rest: str = "") -> str:
        """The sentence for a call this deadline ended, ``rest`` following it as written."""
        return f"timed out after {self.seconds:g} s{rest}"
