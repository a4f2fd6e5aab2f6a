"""A resident worker: one sandboxed worker kept for many jobs of one session (a stateful tool's
kernel), driven job by job over the same two pipes.

It is forked and hardened as every worker is, with every layer; its first job carries
``resident`` and the session's uid and workspace, and the worker then waits on its job pipe for
the next (``sandbox._worker.serve_later_jobs``). Each job's frames end with its result, which
ends the turn; a frame while no job is running, or any other broken rule, is a violation and
the worker is killed. Between turns the worker is stopped (``SIGSTOP``, which reaches the init
of a PID namespace from outside it): what its tool left running, a thread spinning in the
background say, takes no CPU while no call of its session runs, and goes on in the next. Past
a turn's deadline (or at a cancel) the worker is interrupted (SIGINT: the tool's code sees
``KeyboardInterrupt``) and, if its result does not follow within ``INTERRUPT_GRACE_S``, killed
with everything it started. ``end`` kills it for good.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from a2e.caps.tools._reasons import FailureReason
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._limits import Limits, OutputCaps
from a2e_engine.sandbox._messages import Job, Result
from a2e_engine.sandbox._run import (
    KILL_WAIT_S,
    EventSink,
    Outcome,
    ResultReader,
    WorkerHandle,
    outcome_of,
    send_job,
)
from a2e_engine.sandbox._waiting import StopSignal, race

__all__ = ["INTERRUPT_GRACE_S", "Family", "ResidentWorker"]

#: How long an interrupted job may take to send its result before the worker is killed.
INTERRUPT_GRACE_S = 2.0


class _TurnReader(ResultReader):
    """A ``ResultReader`` whose stream is many jobs long: a result ends the job's turn, not the
    stream, and the caps count afresh for each job."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn_done: asyncio.Future[None] = self.loop.create_future()
        self.in_turn = False

    def begin(self, on_event: EventSink) -> None:
        self.on_event = on_event
        self.result = None
        self.bytes_read = self.events = self.dropped = 0
        self.decoder.skip_events = False
        self.turn_done = self.loop.create_future()
        self.in_turn = True

    def _frame(self, frame: dict[str, Any]) -> None:
        if not self.in_turn:
            return self._violate("the worker wrote a frame while no job was running")
        super()._frame(frame)
        if self.result is not None and not self.turn_done.done():
            self.in_turn = False
            self.turn_done.set_result(None)

    def _finish(self) -> None:
        super()._finish()
        if not self.turn_done.done():
            self.turn_done.set_result(None)

    def _violate(self, reason: str, over_limit: bool = False) -> None:
        super()._violate(reason, over_limit)
        if not self.in_turn:
            self.worker.kill()  # no call is there to end it: end it now


class Family:
    """The kept workers copied from one first worker (``sandbox._forks``). They all live in
    its PID namespace, whose init it is: were it killed, the kernel would kill them all. So
    once it has forked it runs nothing more, stopped, and ends when the last of them does."""

    def __init__(self, first: ResidentWorker) -> None:
        self.first = first
        self.members: set[ResidentWorker] = set()
        #: Done once the first worker is gone, and with it the whole family.
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def left(self, member: ResidentWorker) -> None:
        """``member`` ended: the first one too, if it was the last and the first's own
        session is done with it."""
        self.members.discard(member)
        first = self.first
        if not self.members and member is not first and first.ended is not None:
            await first.end("the last of its copies ended")


class ResidentWorker:
    """One session's kept worker. ``run`` a job at a time (its caller holds the session's
    lock: ``engine._resident_workers``); ``end`` it. ``paths``: its workspace and temporary
    directory as it sees them (a copy sees the first worker's, its own mounted there);
    ``family``: the workers it was copied with, if it was."""

    def __init__(
        self,
        worker: WorkerHandle,
        caps: OutputCaps,
        limits: Limits,
        paths: tuple[str, str] = ("", ""),
        family: Family | None = None,
        placed: asyncio.Future[None] | None = None,
        layers: int = 0,
        uid_inside: int | None = None,
    ) -> None:
        self.worker = worker
        self.limits = limits
        self.caps = caps
        self.loop = asyncio.get_running_loop()
        self.reader = _TurnReader(worker, caps, _no_event, self.loop)
        self.ended: str | None = None  # why it is gone, once it is
        self.paths = paths
        self.family = family
        #: A copy's: done once the zygote has placed it (``sandbox._adoption.Placement``); it
        #: runs nothing before.
        self.placed = placed
        #: The Landlock domains it is in beyond its worker's own (``sandbox._forks``), the
        #: last of them entered at its next tool job while ``settling`` (a copy, or one that
        #: has forked since its last tool job): its copies enter one more than it is in.
        self.layers = layers
        self.settling = layers > 0
        #: The uid it sees itself as, where that is not the one it runs as (a copy's session's:
        #: ``sandbox._adoption``); what a copy of it that goes on in its place is given.
        self.uid_inside = uid_inside
        if family is not None:
            family.members.add(self)

    @property
    def alive(self) -> bool:
        reader = self.reader
        return (
            self.ended is None
            and reader.violation is None
            and not reader.eof
            and not self.worker.exited.done()
        )

    def why_gone(self) -> str:
        """Why a worker that is no longer ``alive`` is not, in a phrase."""
        if self.ended is not None:
            return self.ended
        if self.reader.violation is not None:
            return f"it broke the rules: {self.reader.violation}"
        return "it exited"

    async def run(
        self, job: Job, deadline: Deadline, on_event: EventSink, stop: StopSignal
    ) -> Outcome:
        """``job`` in this worker; the first one sets it up (``resident`` set), the next ones
        run in what it kept. A turn that ends any other way than with its result ends the
        worker too."""
        if self.settling and not job.get("copies"):  # it enters its own domain in this turn
            self.settling = False
        if self.placed is not None:
            placed = self.placed
            if not await race(deadline.at, placed, stop=stop) or placed.exception():
                why = "it could not be placed apart" if placed.done() else "it was not placed"
                await self.end(why)
                return Outcome(FailureReason.SANDBOX_UNAVAILABLE, error=f"the copy ended: {why}")
            self.placed = None
        self.reader.begin(on_event)
        self.worker.send_signal(signal.SIGCONT)
        # The job pipe stays open: the worker reads its next job from it between jobs.
        await send_job(self.worker, job, deadline, stop, close=False)
        ended_by: FailureReason | None = None
        if not await race(deadline.at, self.reader.turn_done, self.worker.exited, stop=stop):
            ended_by = FailureReason.CANCELLED if stop.is_set() else FailureReason.TIMEOUT
            # As a notebook does: interrupt the job, and keep what the worker holds if it
            # answers.
            self.worker.send_signal(signal.SIGINT)
            await race(self.loop.time() + INTERRUPT_GRACE_S, self.reader.turn_done)
        result = self.reader.result
        if result is None or self.reader.violation is not None:
            await self.end("its job did not end with a result")
            return outcome_of(self.worker, self.reader, ended_by, True, deadline, self.limits)
        self.worker.send_signal(signal.SIGSTOP)  # until its session's next call
        if ended_by is not None:
            return self._interrupted(ended_by, result, deadline)
        # The turn ended with its result; the worker stays, so its own account is all there is.
        return outcome_of(self.worker, self.reader, None, False, deadline, self.limits)

    def _interrupted(self, ended_by: FailureReason, result: Result, deadline: Deadline) -> Outcome:
        """A job that ran past its deadline (or was cancelled) and gave in to the interrupt:
        the call failed, what the job said comes back, and the worker stays."""
        why = (
            deadline.timed_out("; it was interrupted")
            if ended_by is FailureReason.TIMEOUT
            else "cancelled; it was interrupted"
        )
        return Outcome(
            ended_by,
            data=result.data if result.ok else None,
            error=f"{why}, and the session keeps its state",
            cpu_ms=result.cpu_ms,
            peak_rss_kb=result.maxrss_kb,
            events_dropped=self.reader.dropped,
            retryable=False,
        )

    async def end(self, why: str) -> None:
        """Kill the worker and everything it started, and wait for its exit report; a
        family's first worker only once its copies are gone (``Family``)."""
        if self.ended is None:
            self.ended = why
        family = self.family
        if family is not None and family.first is self and family.members:
            return  # stopped; the last copy to go ends it
        self.worker.kill()
        await race(self.loop.time() + KILL_WAIT_S, self.worker.exited)
        self.reader.drain()
        self.reader.stop()
        self.worker.close()
        if family is not None and family.first is self and not family.gone.done():
            family.gone.set_result(None)
        if family is not None:
            await family.left(self)


def _no_event(kind: str, data: dict[str, Any]) -> None:
    raise ValueError("the worker wrote an event while no job was running")
