"""``WorkerSlots``: how many calls hold a worker at once, admitted by what they use.

Up to ``busy`` calls start at once, whatever they do. Past that, a call starts only while
``room`` says the running calls leave room for it (in the engine: fewer than ``busy`` of them
have a process on the CPU, and the sandbox's memory is below its high-water mark), and never
more than ``count`` in all. A call that sleeps or waits on a child holds a worker and no core,
so calls that wait run together instead of queueing behind the CPU bound, and calls that
compute are held to it. A call that has run ``LONG_RUN_S`` is likely to run to its deadline (a
program that loops forever, or waits out its time limit): up to ``busy`` such calls compute
beside the others rather than hold the queue for their whole time limits, so at most twice
``busy`` compute at once, and the calls behind a batch's endless loops start in seconds. The
others wait their turn in order, each within its own deadline, and a cancel ends the wait;
while any waits, ``room`` is asked again every ``RECHECK_S``, since a running call can go to
sleep without ending.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._waiting import StopSignal, race

__all__ = ["LONG_RUN_S", "RECHECK_S", "WorkerSlots"]

log = logging.getLogger("a2e.sandbox")

#: How often waiting calls look again for room beside the running ones.
RECHECK_S = 0.05
#: How long a call runs before it holds back the queue only past ``busy`` such calls.
LONG_RUN_S = 2.0


class WorkerSlots:
    def __init__(
        self, count: int, busy: int | None = None, room: Callable[[], bool] | None = None
    ) -> None:
        self.count = count
        self.busy = min(busy or count, count)
        #: Whether one more call may start beside ``busy`` or more running ones.
        self.room = room or (lambda: False)
        self.in_flight = 0  # calls that hold a slot
        self._turns: collections.deque[asyncio.Future[None]] = collections.deque()
        self._recheck: asyncio.TimerHandle | None = None

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return sum(1 for turn in self._turns if not turn.done())

    def _may_start(self) -> bool:
        if self.in_flight < self.busy:
            return True
        if self.in_flight >= self.count:
            return False
        try:
            return self.room()
        except Exception:  # no room that cannot be judged: the calls wait for a release
            log.exception("judging room for one more call failed")
            return False

    async def acquire(self, deadline: Deadline, stop: StopSignal) -> bool:
        """True once a slot is ours (``release`` it); False if the deadline or the stop came
        first."""
        if stop.is_set():
            return False
        if not self._turns and self._may_start():
            self.in_flight += 1
            return True
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._turns.append(turn)
        self._admit()  # the calls ahead of it may all have given up their turns
        try:
            got = await race(deadline.at, turn, stop=stop)
        except BaseException:  # the waiting task itself cancelled
            if not turn.cancel():  # it had been given the slot
                self.release()
            raise
        turn.cancel()
        if not got:
            if turn.done() and not turn.cancelled():
                self.release()  # given to us as the deadline or the stop came
            return False
        return True

    def release(self) -> None:
        self.in_flight -= 1
        self._admit()

    def _admit(self) -> None:
        """Gives slots to the calls waiting longest, while they may start."""
        while self._turns:
            turn = self._turns[0]
            if turn.done():  # its wait ended
                self._turns.popleft()
                continue
            if not self._may_start():
                break
            self._turns.popleft()
            self.in_flight += 1
            turn.set_result(None)
        self._schedule_recheck()

    def _schedule_recheck(self) -> None:
        if self._turns and self._recheck is None:
            loop = asyncio.get_running_loop()
            self._recheck = loop.call_later(RECHECK_S, self._rechecked)

    def _rechecked(self) -> None:
        self._recheck = None
        self._admit()
