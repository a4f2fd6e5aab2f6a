"""Layers ``deadline`` and ``frames``: one job through one worker, to one ``Outcome``.

The supervisor writes the job to the worker's job pipe, reads its result pipe on the event loop
as frames come, and ends the run at the deadline at the latest. The worker is hostile: what it
writes is checked frame by frame (``sandbox._frames``, ``sandbox._messages``), counted against
the output and event caps (``OutputCaps``), and the first broken rule ends the stream as a
violation.

The worker ends the call by finishing its stream; the deadline or a cancel end it otherwise
(after a SIGTERM and the tool's grace, if it asked for one). Whatever ends it, the worker and
everything it started are killed, and its exit is waited for (but for a worker that cannot fork
and already sent its result: it is killed and exits off the call's path). ``Outcome`` says what
happened, first reason first: a broken rule, the deadline, a cancel, the tool's own result, and
only then how the worker died.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2e.caps.tools._reasons import FailureReason
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._exits import how_it_ended, signal_name
from a2e_engine.sandbox._frames import (
    SKIPPED_EVENT,
    FrameDecoder,
    FrameError,
    FrameTooLarge,
)
from a2e_engine.sandbox._limits import Limits, OutputCaps
from a2e_engine.sandbox._messages import (
    Event,
    Exited,
    Job,
    MalformedMessage,
    Result,
    Share,
    check_worker_frame,
    encode_job,
)
from a2e_engine.sandbox._profiles import PROFILES
from a2e_engine.sandbox._waiting import StopSignal, race

if TYPE_CHECKING:
    from a2e_engine.sandbox._call_input import CallInput
    from a2e_engine.sandbox.layers import LayerReport

__all__ = [
    "KILL_WAIT_S",
    "ZYGOTE_DIED",
    "EventSink",
    "Outcome",
    "ResultReader",
    "ShareSink",
    "WorkerExit",
    "WorkerHandle",
    "describe_exit",
    "not_started",
    "outcome_of",
    "report_layers",
    "run_job",
    "send_job",
]

log = logging.getLogger("a2e.sandbox")

#: How long a worker that sent its result may take to exit before it is killed.
EXIT_GRACE_S = 5.0
#: How long a worker that closed its pipe without a result may take to exit (it is probably
#: dying already: os._exit, a signal) before it is killed as unresponsive.
NO_RESULT_GRACE_S = 0.5
#: How long to wait for the exit report after SIGKILL.
KILL_WAIT_S = 10.0
#: Events past the cap are dropped; this many times the cap more and the worker is killed.
EVENT_FLOOD_FACTOR = 10

#: Where an event a worker wrote goes: its kind and data (``ValueError`` if they are not valid).
EventSink = Callable[[str, dict[str, Any]], None]
#: Where what a worker offered to share goes (``sandbox._sharing``): what it is and its data.
ShareSink = Callable[[str, dict[str, Any]], None]


def report_layers() -> dict[str, LayerReport]:
    """The supervisor applies these layers itself, so they are on wherever the engine runs."""
    return {"deadline": {"active": True, "reason": ""}, "frames": {"active": True, "reason": ""}}


# -- the worker as the supervisor sees it --


@dataclass(frozen=True)
class WorkerExit:
    """How a worker ended, as its zygote reported it (``status`` is the raw wait status), or
    that nobody could: the zygote died first."""

    status: int = 0
    cpu_ms: int = 0
    maxrss_kb: int = 0
    oom: bool = False
    zygote_died: bool = False

    @classmethod
    def reported(cls, message: Exited) -> WorkerExit:
        """From the zygote's ``exit`` control message (``messages.check_control`` checked it)."""
        return cls(message["status"], message["cpu_ms"], message["maxrss_kb"], message["oom"])


#: What a worker whose zygote died ended with.
ZYGOTE_DIED = WorkerExit(zygote_died=True)


class WorkerHandle:
    """A forked worker as the supervisor sees it: its pipes, its pidfd, its exit."""

    def __init__(self, pid: int, profile: str, fds: list[int], loop: asyncio.AbstractEventLoop):
        self.pid = pid
        self.profile = profile
        self.job_fd, self.result_fd, self.pidfd = fds
        self.exited: asyncio.Future[WorkerExit] = loop.create_future()
        self.busy = False
        os.set_blocking(self.job_fd, False)
        os.set_blocking(self.result_fd, False)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, sig: int) -> None:
        if self.pidfd < 0:
            return
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(self.pidfd, sig)

    def close(self) -> None:
        for name in ("job_fd", "result_fd", "pidfd"):
            fd = getattr(self, name)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, name, -1)


# -- reading the result pipe --


class ResultReader:
    """Reads one worker's result pipe on the event loop; all caps are enforced here."""

    def __init__(
        self,
        worker: WorkerHandle,
        config: OutputCaps,
        on_event: EventSink,
        loop: asyncio.AbstractEventLoop,
        on_share: ShareSink | None = None,
    ) -> None:
        """``on_share``: the store of the job's plugin; ``None``, it owns none, and a worker
        that offers something breaks the rules."""
        self.worker = worker
        self.config = config
        self.on_event = on_event
        self.on_share = on_share
        self.decoder = FrameDecoder(config.max_frame)
        self.bytes_read = 0
        self.events = 0
        self.dropped = 0
        self.result: Result | None = None
        self.setup_error: str | None = None
        self.violation: str | None = None
        self.over_limit = False  # the violation broke a cap (size, count), not the protocol
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
                f"the worker wrote more than {self.config.max_output_bytes} bytes of output",
                over_limit=True,
            )
        try:
            frames = self.decoder.feed(data)
        except FrameTooLarge as exc:
            return self._violate(f"the worker wrote too large a frame: {exc}", over_limit=True)
        except FrameError as exc:
            return self._violate(f"the worker wrote an invalid frame: {exc}")
        for frame in frames:
            self._frame(frame)
            if self.violation is not None:
                return

    def _frame(self, frame: dict[str, Any]) -> None:
        if self.result is not None or self.setup_error is not None:
            return self._violate("the worker wrote a frame after its result")
        if frame is SKIPPED_EVENT:
            return self._drop_event()
        try:
            said = check_worker_frame(frame)
        except MalformedMessage as exc:
            return self._violate(str(exc))
        if isinstance(said, Event):
            if self.events >= self.config.max_events:
                return self._drop_event()
            self.events += 1
            try:
                self.on_event(said.kind, said.data)
            except ValueError as exc:
                return self._violate(f"the worker wrote an invalid event: {exc}")
        elif isinstance(said, Share):
            if self.on_share is None:
                return self._violate("the worker offered to share, and its tool shares nothing")
            self.on_share(said.what, said.data)
        elif isinstance(said, Result):
            # Not finished yet: only end of stream proves no (forged or genuine) second result
            # follows; the worker closes its end right after its result.
            self.result = said
        else:
            self.setup_error = said.error

    def _drop_event(self) -> None:
        """An event past the cap: counted, not read (``FrameDecoder.skip_events``); a flood
        far past it ends the stream."""
        self.dropped += 1
        self.decoder.skip_events = True
        if self.dropped > EVENT_FLOOD_FACTOR * self.config.max_events:
            self._violate(
                f"the worker wrote more than {EVENT_FLOOD_FACTOR + 1} times the "
                f"{self.config.max_events}-event cap",
                over_limit=True,
            )

    def _violate(self, reason: str, over_limit: bool = False) -> None:
        self.violation = reason
        self.over_limit = over_limit
        self.stop()
        self._finish()

    def drain(self) -> None:
        """After the worker died: read what is left (every writer is gone, so this ends)."""
        if self.eof or self.violation is not None:
            return
        self.on_readable(budget=self.config.max_output_bytes)


# -- driving the run --


async def run_job(
    worker: WorkerHandle,
    job: Job,
    deadline: Deadline,
    on_event: EventSink,
    stop: StopSignal,
    caps: OutputCaps,
    limits: Limits,
    on_share: ShareSink | None = None,
    given: CallInput | None = None,
) -> Outcome:
    """``job`` through ``worker``, which is gone when this returns, and what came of it;
    ``given``: the call's input, sent down the job pipe after the job (``Job.input``)."""
    loop = asyncio.get_running_loop()
    reader = ResultReader(worker, caps, on_event, loop, on_share)
    ended_by: FailureReason | None = None
    exit_awaited = True
    try:
        await send_job(worker, job, deadline, stop, close=given is None)
        if given is not None:
            given.attach(worker)
        if not await race(deadline.at, reader.finished, worker.exited, stop=stop):
            ended_by = FailureReason.CANCELLED if stop.is_set() else FailureReason.TIMEOUT
            grace = job["cancel_grace_s"]
            if grace > 0:
                # The tool asked to hear about it: it may cancel work it started elsewhere.
                worker.send_signal(signal.SIGTERM)
                await race(loop.time() + grace, worker.exited)
        if ended_by is not None or reader.violation is not None:
            worker.kill()
        elif reader.result is not None and not PROFILES[worker.profile].allow_processes:
            # A worker that cannot fork has nothing that could outlive it: kill it now (no user
            # code runs after SIGKILL is queued) and let it exit off our path.
            worker.kill()
            exit_awaited = False
        else:
            # It finished its stream; it should be exiting. Give it a moment (within the call's
            # own budget) to report how it ended, then make sure it is gone.
            grace = loop.time() + (EXIT_GRACE_S if reader.result else NO_RESULT_GRACE_S)
            if not await race(min(deadline.at, grace), worker.exited, stop=stop):
                if reader.result is None:
                    reader.unresponsive = True
                worker.kill()
        if exit_awaited:
            # After SIGKILL the exit report follows at once (or the zygote died: resolved).
            await race(loop.time() + KILL_WAIT_S, worker.exited)
        reader.drain()
    finally:
        if given is not None:
            given.detach()
        reader.stop()
        worker.close()
    outcome = outcome_of(worker, reader, ended_by, exit_awaited, deadline, limits)
    if outcome.reason == FailureReason.CANCELLED and stop.why:
        outcome.error = f"cancelled ({stop.why}); the worker and all its processes were killed"
    return outcome


async def send_job(
    worker: WorkerHandle, job: Job, deadline: Deadline, stop: StopSignal, close: bool = True
) -> None:
    """``job`` written to the worker's job pipe as it drains (its two frames,
    ``sandbox._messages.encode_job``); then the pipe is closed, unless the worker is resident
    (``close=False``: its next jobs follow on it)."""
    data = memoryview(encode_job(job))
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


# -- what a run means --


@dataclass
class Outcome:
    """What the supervisor learned about one run, before it becomes a protocol result: why it
    failed (``reason``; ``None``: the tool returned a result), its data or its error in a
    sentence, and what it cost."""

    reason: FailureReason | None
    data: Any = None
    error: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    cpu_ms: int | None = None
    peak_rss_kb: int | None = None
    queued_ms: int = 0
    events_dropped: int = 0
    retryable: bool = True

    @property
    def ok(self) -> bool:
        return self.reason is None


_SIGNAL_MEANING: dict[int, str] = {
    signal.SIGSYS: "killed by the seccomp filter: the tool made a forbidden system call (SIGSYS)",
    signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV)",
    signal.SIGBUS: "crashed with a bus error (SIGBUS)",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGXCPU: "exceeded its CPU-time limit (SIGXCPU)",
    signal.SIGXFSZ: "exceeded its file-size limit (SIGXFSZ)",
    signal.SIGKILL: "was killed by SIGKILL (for example by the kernel's out-of-memory killer)",
    signal.SIGFPE: "crashed with an arithmetic fault (SIGFPE)",
    signal.SIGILL: "crashed with an illegal instruction (SIGILL)",
}


def describe_exit(status: int) -> tuple[int, str | None, str]:
    """(exit_code, signal name, sentence) for a raw wait status; exit_code is -signo on a signal."""
    if os.WIFSIGNALED(status):
        signo = os.WTERMSIG(status)
        meaning = _SIGNAL_MEANING.get(signo)
        return -signo, signal_name(signo), f"the worker {meaning or how_it_ended(-signo)}"
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return 0, None, "the worker exited without sending a result"
    return code, None, f"the worker exited with code {code} before sending a result"


def _out_of_cpu_time(outcome: Outcome, limits: Limits) -> bool:
    """RLIMIT_CPU's end: SIGXCPU at the soft limit, SIGKILL a second later at the hard one
    (the only one pid 1 of a PID namespace cannot ignore)."""
    spent = outcome.cpu_ms is not None and outcome.cpu_ms >= limits.cpu_seconds * 1000
    return spent and outcome.signal in ("SIGXCPU", "SIGKILL")


def not_started(
    stop: StopSignal, deadline: Deadline, queued_ms: int, waiting: str, detail: str = ""
) -> Outcome:
    """A call that never got a worker: cancelled, or timed out while ``waiting``."""
    if stop.is_set():
        why = f": {stop.why}" if stop.why else ""
        return Outcome(
            FailureReason.CANCELLED, error=f"cancelled before the tool started ({waiting}){why}"
        )
    return Outcome(
        FailureReason.TIMEOUT,
        queued_ms=queued_ms,
        error=deadline.timed_out(f" while {waiting}{detail}"),
    )


def outcome_of(
    worker: WorkerHandle,
    reader: ResultReader,
    ended_by: FailureReason | None,
    exit_awaited: bool,
    deadline: Deadline,
    limits: Limits,
) -> Outcome:
    """What a finished run means. ``ended_by``: TIMEOUT or CANCELLED when the call was ended
    from outside; ``exit_awaited`` False: the worker sent its result and was killed, exiting
    off the call's path, so its own account of itself is all there is."""
    outcome = Outcome(FailureReason.WORKER_CRASHED, events_dropped=reader.dropped)
    result = reader.result
    sentence = ""
    if not exit_awaited and result is not None:
        ended = WorkerExit()
        outcome.exit_code = 0
        outcome.cpu_ms = result.cpu_ms
        outcome.peak_rss_kb = result.maxrss_kb
    else:
        ended = worker.exited.result() if worker.exited.done() else ZYGOTE_DIED
        if not ended.zygote_died:
            outcome.exit_code, outcome.signal, sentence = describe_exit(ended.status)
            outcome.cpu_ms = ended.cpu_ms
            outcome.peak_rss_kb = ended.maxrss_kb
    if reader.violation is not None:
        outcome.reason = (
            FailureReason.OUTPUT_LIMIT if reader.over_limit else FailureReason.WORKER_VIOLATION
        )
        outcome.error = f"{reader.violation}; it was killed"
    # A result written during a cancel grace (the tool cleaning up) does not change why the
    # call ended.
    elif ended_by is FailureReason.TIMEOUT:
        outcome.reason = ended_by
        outcome.error = deadline.timed_out("; the worker and all its processes were killed")
    elif ended_by is FailureReason.CANCELLED:
        outcome.reason = ended_by
        outcome.error = "cancelled; the worker and all its processes were killed"
    elif result is not None:
        outcome.reason = None if result.ok else result.reason or FailureReason.TOOL_FAILED
        outcome.data = result.data
        outcome.error = result.error
        outcome.retryable = result.retryable
    elif reader.unresponsive:
        outcome.error = (
            "the worker closed its result pipe without sending a result and did not exit; "
            "it was killed"
        )
    elif reader.setup_error is not None:
        outcome.reason = FailureReason.SANDBOX_UNAVAILABLE
        outcome.error = f"the sandbox could not be set up: {reader.setup_error}"
    elif ended.oom:
        outcome.reason = FailureReason.OUT_OF_MEMORY
        outcome.error = (
            f"out of memory: the call went past its {limits.call_memory_mb} MiB memory limit "
            "(or the sandbox past its bound on all calls and sessions together) and the kernel "
            "killed it"
        )
    elif _out_of_cpu_time(outcome, limits):
        outcome.reason = FailureReason.CPU_LIMIT
        outcome.error = (
            f"the worker used up its {limits.cpu_seconds} s of CPU time and the kernel killed "
            f"it ({outcome.signal})"
        )
    elif ended.zygote_died:
        outcome.error = "the sandbox zygote died during the call; the call was aborted"
    else:
        if outcome.signal == "SIGXFSZ":
            outcome.reason = FailureReason.OUTPUT_LIMIT  # a file past RLIMIT_FSIZE
        outcome.error = sentence
    return outcome
