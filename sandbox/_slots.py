"""``WorkerSlots``: at most ``max_workers`` calls hold a worker at once; the others wait their
turn, each within its own deadline, and a cancel ends the wait."""

from __future__ import annotations

import asyncio

from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._waiting import StopSignal, race

__all__ = ["WorkerSlots"]


class WorkerSlots:
    def __init__(self, count: int) -> None:
        self._free = asyncio.Semaphore(count)
        self.in_flight = 0  # calls that hold a slot
        self.waiting = 0  # calls waiting for one

    async def acquire(self, deadline: Deadline, stop: StopSignal) -> bool:
        """True once a slot is ours (``release`` it); False if the deadline or the stop came
        first."""
        if self._free.locked() or stop.is_set():
            loop = asyncio.get_running_loop()
            acquire = loop.create_task(self._free.acquire())
            self.waiting += 1
            try:
                got = await race(deadline.at, acquire, stop=stop)
            finally:
                self.waiting -= 1
            if not got:
                acquire.cancel()
                if acquire.done() and not acquire.cancelled():
                    self._free.release()
                return False
        else:
            await self._free.acquire()  # free: returns at once
        self.in_flight += 1
        return True

    def release(self) -> None:
        self.in_flight -= 1
        self._free.release()
