"""Layer ``deadline``: driving one job through one worker: send the job, read its frames as they
come, and end it, at the deadline at the latest.

The worker ends the call by finishing its stream; the deadline or a cancel end it otherwise
(after a SIGTERM and the tool's grace, if it asked for one). Whatever ends it, the worker and
everything it started are killed, and its exit is waited for (but for a worker that cannot
fork and already sent its result: it is killed and exits off the call's path). What happened is
a ``Run``; ``sandbox.outcome.classify`` says what it means.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
from typing import Any

from a2e_engine.sandbox.deadline import Deadline
from a2e_engine.sandbox.frames import encode_frame
from a2e_engine.sandbox.handle import WorkerHandle
from a2e_engine.sandbox.messages import Job
from a2e_engine.sandbox.outcome import OutcomeStatus, Run
from a2e_engine.sandbox.profiles import PROFILES
from a2e_engine.sandbox.stream import EventSink, OutputCaps, ResultReader
from a2e_engine.sandbox.waiting import StopSignal, race

__all__ = ["drive", "report_deadline", "send_job"]

log = logging.getLogger("a2e.sandbox")

#: How long a worker that sent its result may take to exit before it is killed.
EXIT_GRACE_S = 5.0
#: How long a worker that closed its pipe without a result may take to exit (it is probably
#: dying already: os._exit, a signal) before it is killed as unresponsive.
NO_RESULT_GRACE_S = 0.5
#: How long to wait for the exit report after SIGKILL.
KILL_WAIT_S = 10.0


def report_deadline() -> dict[str, dict[str, Any]]:
    """The supervisor applies this layer itself, so it is on wherever the engine runs."""
    return {"deadline": {"active": True, "reason": ""}}


async def drive(
    worker: WorkerHandle,
    job: Job,
    deadline: Deadline,
    on_event: EventSink,
    stop: StopSignal,
    caps: OutputCaps,
) -> Run:
    loop = asyncio.get_running_loop()
    started = loop.time()
    reader = ResultReader(worker, caps, on_event, loop)
    run = Run(worker, reader, ended_by=None, exit_awaited=True)
    try:
        await send_job(worker, job, deadline, stop)
        if not await race(deadline.at, reader.finished, worker.exited, stop=stop):
            run.ended_by = OutcomeStatus.CANCELLED if stop.is_set() else OutcomeStatus.TIMEOUT
            grace = job["cancel_grace_s"]
            if grace > 0:
                # The tool asked to hear about it: it may cancel work it started elsewhere.
                worker.send_signal(signal.SIGTERM)
                await race(loop.time() + grace, worker.exited)
        if run.ended_by is not None or reader.violation is not None:
            worker.kill()
        elif reader.result is not None and not PROFILES[worker.profile].allow_processes:
            # A worker that cannot fork has nothing that could outlive it: kill it now (no user
            # code runs after SIGKILL is queued) and let it exit off our path.
            worker.kill()
            run.exit_awaited = False
        else:
            # It finished its stream; it should be exiting. Give it a moment (within the call's
            # own budget) to report how it ended, then make sure it is gone.
            grace = loop.time() + (EXIT_GRACE_S if reader.result else NO_RESULT_GRACE_S)
            if not await race(min(deadline.at, grace), worker.exited, stop=stop):
                if reader.result is None:
                    reader.unresponsive = True
                worker.kill()
        if run.exit_awaited:
            # After SIGKILL the exit report follows at once (or the zygote died: resolved).
            await race(loop.time() + KILL_WAIT_S, worker.exited)
        reader.drain()
    finally:
        reader.stop()
        worker.close()
    run.run_ms = int((loop.time() - started) * 1000)
    return run


async def send_job(
    worker: WorkerHandle, job: Job, deadline: Deadline, stop: StopSignal, close: bool = True
) -> None:
    """``job`` written to the worker's job pipe as it drains; then the pipe is closed, unless
    the worker is resident (``close=False``: its next jobs follow on it)."""
    data = memoryview(encode_frame(job))
    loop = asyncio.get_running_loop()
    while data:
        try:
            written = os.write(worker.job_fd, data)
            data = data[written:]
        except BlockingIOError:
            writable: asyncio.Future[None] = loop.create_future()
            loop.add_writer(worker.job_fd, _resolve, writable)
            try:
                if not await race(deadline.at, writable, worker.exited, stop=stop):
                    return  # the deadline or the cancel is handled by the caller
            finally:
                loop.remove_writer(worker.job_fd)
            if worker.exited.done():
                return
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                log.warning("writing a job to worker %d: %s", worker.pid, exc)
            return  # the worker is gone; its outcome will say why
    if close:
        os.close(worker.job_fd)
        worker.job_fd = -1


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
