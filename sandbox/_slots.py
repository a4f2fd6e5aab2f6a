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
others wait their turn, each within its own deadline, and a cancel ends the wait; while any
waits, ``room`` is asked again every ``RECHECK_S``, since a running call can go to sleep
without ending.

Turns are fair between tenants (a call's ``tenant``: a client address, an API key, a session):
a freed slot goes to the waiting call whose tenant holds the fewest slots, and among those to
the tenant served longest ago, its call waiting longest. A tenant that queues a thousand calls
makes another's one call wait for the next free slot, not behind the thousand.
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
        #: Slots held, by tenant.
        self.held: collections.Counter[str] = collections.Counter()
        #: When each tenant was last given a slot (a count of grants).
        self._served: dict[str, int] = {}
        self._grants = 0
        #: The calls waiting, each with its tenant, the longest waiting first.
        self._turns: collections.deque[tuple[asyncio.Future[None], str]] = collections.deque()
        self._recheck: asyncio.TimerHandle | None = None

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return sum(1 for turn, _ in self._turns if not turn.done())

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

    async def acquire(self, deadline: Deadline, stop: StopSignal, tenant: str = "") -> bool:
        """True once a slot is ours (``release`` it, with the same ``tenant``); False if the
        deadline or the stop came first."""
        if stop.is_set():
            return False
        if not self.waiting and self._may_start():
            self._grant(tenant)
            return True
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._turns.append((turn, tenant))
        self._admit()  # the calls ahead of it may all have given up their turns
        try:
            got = await race(deadline.at, turn, stop=stop)
        except BaseException:  # the waiting task itself cancelled
            if not turn.cancel():  # it had been given the slot
                self.release(tenant)
            raise
        turn.cancel()
        if not got:
            if turn.done() and not turn.cancelled():
                self.release(tenant)  # given to us as the deadline or the stop came
            return False
        return True

    def release(self, tenant: str = "") -> None:
        self.in_flight -= 1
        self.held[tenant] -= 1
        if self.held[tenant] <= 0:
            del self.held[tenant]
        self._admit()

    def _admit(self) -> None:
        """Gives slots to waiting calls while they may start: each to the call whose tenant
        holds the fewest, the one waiting longest among those."""
        while True:
            while self._turns and self._turns[0][0].done():  # its wait ended
                self._turns.popleft()
            if not self._turns or not self._may_start():
                break
            chosen = min(
                (entry for entry in self._turns if not entry[0].done()),
                key=lambda entry: (self.held[entry[1]], self._served.get(entry[1], -1)),
            )
            self._turns.remove(chosen)
            turn, tenant = chosen
            self._grant(tenant)
            turn.set_result(None)
        self._schedule_recheck()

    def _grant(self, tenant: str) -> None:
        self.in_flight += 1
        self.held[tenant] += 1
        self._grants += 1
        self._served[tenant] = self._grants
        if len(self._served) > 4096:  # tenants long gone: the oldest forgotten
            for gone in sorted(self._served, key=self._served.__getitem__)[:2048]:
                del self._served[gone]

    def _schedule_recheck(self) -> None:
        if self._turns and self._recheck is None:
            loop = asyncio.get_running_loop()
            self._recheck = loop.call_later(RECHECK_S, self._rechecked)

    def _rechecked(self) -> None:
        self._recheck = None
        self._admit()
