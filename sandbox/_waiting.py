"""Waiting on several things at once without helper tasks: a call's end, its deadline, a cancel.

These waits happen several times per call, on the hot path; plain callbacks on futures and one
timer handle cost far less than a task per condition with ``asyncio.wait``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["StopSignal", "race"]


class StopSignal(asyncio.Event):
    """An ``asyncio.Event`` that also calls back when set, so a wait on it needs no task.

    The engine sets it to cancel a call; the pool then kills the call's worker.
    """

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], None]] = []
        #: Why, when the one who stopped the call said (the engine ending its session).
        self.why = ""

    def set(self) -> None:
        super().set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], None]) -> None:
        if self.is_set():
            callback()
        else:
            self._callbacks.append(callback)

    def remove_callback(self, callback: Callable[[], None]) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)


async def race(
    deadline: float, *futures: asyncio.Future[Any], stop: StopSignal | None = None
) -> bool:
    """Wait until one of ``futures`` is done (True), or ``deadline`` (loop time) or ``stop``
    comes first (False). Callbacks only, no helper tasks: this runs several times per call."""
    loop = asyncio.get_running_loop()
    if any(f.done() for f in futures):
        return True
    if deadline <= loop.time() or (stop is not None and stop.is_set()):
        return False
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(*_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    for future in futures:
        future.add_done_callback(wake)
    timer = loop.call_at(deadline, wake)
    if stop is not None:
        stop.add_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        for future in futures:
            future.remove_done_callback(wake)
        if stop is not None:
            stop.remove_callback(wake)
    return any(f.done() for f in futures)
