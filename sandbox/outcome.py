"""What the supervisor learned about one worker run, before it becomes a protocol result:
its status, its data or its error in a sentence, and what it cost."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from a2e_engine.sandbox.exits import how_it_ended, signal_name

if TYPE_CHECKING:
    from a2e_engine.sandbox.deadline import Deadline
    from a2e_engine.sandbox.handle import WorkerHandle
    from a2e_engine.sandbox.limits import Limits
    from a2e_engine.sandbox.stream import ResultReader
    from a2e_engine.sandbox.waiting import StopSignal

__all__ = ["OutcomeStatus", "Run", "WorkerOutcome", "classify", "describe_exit", "not_started"]


class OutcomeStatus(StrEnum):
    OK = "ok"  # the tool returned a result
    FAILED = "failed"  # the tool raised; error says what
    TIMEOUT = "timeout"  # the wall-clock deadline passed; the tree was killed
    CANCELLED = "cancelled"  # tool/cancel/req or shutdown; the tree was killed
    CRASHED = "crashed"  # the worker died without a result (signal, os._exit, zygote death)
    VIOLATION = "violation"  # the worker broke the frame protocol or a cap; it was killed
    SETUP_FAILED = "setup_failed"  # a sandbox layer could not be applied; the tool never ran
    UNAVAILABLE = "unavailable"  # no worker could be had (sandbox broken)


@dataclass
class Run:
    """How one job's run through a worker ended (``sandbox.drive``), before ``classify``."""

    worker: WorkerHandle
    reader: ResultReader
    ended_by: OutcomeStatus | None  # TIMEOUT or CANCELLED when the call was ended from outside
    exit_awaited: bool  # False: killed after its result, exiting off the call's path
    run_ms: int = 0


@dataclass
class WorkerOutcome:
    status: OutcomeStatus
    data: Any = None
    error: str | None = None
    exc_type: str | None = None
    traceback: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    cpu_ms: int | None = None
    peak_rss_kb: int | None = None
    queued_ms: int = 0
    run_ms: int = 0
    events_dropped: int = 0
    retryable: bool = True
    reason: str | None = None  # what a FAILED tool said of its failure (TOOL_REASONS)
    out_of_memory: bool = False  # the kernel's OOM killer ended the call (its memory cgroup)
    cpu_limit: bool = False  # the kernel ended the call at its CPU-time limit (RLIMIT_CPU)
    over_limit: bool = False  # a VIOLATION of a cap on output or events, not of the protocol
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is OutcomeStatus.OK


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


def _out_of_cpu_time(outcome: WorkerOutcome, limits: Limits) -> bool:
    """RLIMIT_CPU's end: SIGXCPU at the soft limit, SIGKILL a second later at the hard one
    (the only one pid 1 of a PID namespace cannot ignore)."""
    spent = outcome.cpu_ms is not None and outcome.cpu_ms >= limits.cpu_seconds * 1000
    return spent and outcome.signal in ("SIGXCPU", "SIGKILL")


def not_started(
    stop: StopSignal, deadline: Deadline, queued_ms: int, waiting: str, detail: str = ""
) -> WorkerOutcome:
    """A call that never got a worker: cancelled, or timed out while ``waiting``."""
    if stop.is_set():
        return WorkerOutcome(
            OutcomeStatus.CANCELLED, error=f"cancelled before the tool started ({waiting})"
        )
    return WorkerOutcome(
        OutcomeStatus.TIMEOUT,
        queued_ms=queued_ms,
        error=deadline.timed_out(f" while {waiting}{detail}"),
    )


def classify(run: Run, deadline: Deadline, limits: Limits) -> WorkerOutcome:
    """What a finished ``Run`` means, first reason first: a broken rule, the deadline, a
    cancel, the tool's own result, and only then how the worker died."""
    worker, reader = run.worker, run.reader
    outcome = WorkerOutcome(OutcomeStatus.CRASHED, events_dropped=reader.dropped)
    outcome.run_ms = run.run_ms
    result = reader.result
    sentence = ""
    if not run.exit_awaited and result is not None:
        # Exited off the path: its own account of itself is all there is (and it only
        # concerns itself).
        outcome.exit_code = 0
        outcome.cpu_ms = result.cpu_ms
        outcome.peak_rss_kb = result.maxrss_kb
        info: dict[str, Any] = {}
    else:
        info = worker.exited.result() if worker.exited.done() else {"zygote_died": True}
    if "status" in info:
        outcome.exit_code, outcome.signal, sentence = describe_exit(int(info["status"]))
        outcome.cpu_ms = int(info.get("cpu_ms", 0))
        outcome.peak_rss_kb = int(info.get("maxrss_kb", 0))
    if reader.violation is not None:
        outcome.status = OutcomeStatus.VIOLATION
        outcome.error = f"{reader.violation}; it was killed"
        outcome.over_limit = reader.over_limit
    # A result written during a cancel grace (the tool cleaning up) does not change why the
    # call ended.
    elif run.ended_by is OutcomeStatus.TIMEOUT:
        outcome.status = run.ended_by
        outcome.error = deadline.timed_out("; the worker and all its processes were killed")
    elif run.ended_by is OutcomeStatus.CANCELLED:
        outcome.status = run.ended_by
        outcome.error = "cancelled; the worker and all its processes were killed"
    elif result is not None:
        outcome.status = OutcomeStatus.OK if result.ok else OutcomeStatus.FAILED
        outcome.data = result.data
        outcome.error = result.error
        outcome.exc_type = result.exc_type
        outcome.reason = result.reason
        outcome.retryable = result.retryable
        outcome.traceback = result.traceback
    elif reader.unresponsive:
        outcome.error = (
            "the worker closed its result pipe without sending a result and did not exit; "
            "it was killed"
        )
    elif reader.setup_error is not None:
        outcome.status = OutcomeStatus.SETUP_FAILED
        outcome.error = f"the sandbox could not be set up: {reader.setup_error}"
    elif info.get("oom"):
        outcome.out_of_memory = True
        outcome.error = (
            f"out of memory: the call went past its {limits.call_memory_mb} MiB memory limit "
            "and the kernel killed it"
        )
    elif _out_of_cpu_time(outcome, limits):
        outcome.cpu_limit = True
        outcome.error = (
            f"the worker used up its {limits.cpu_seconds} s of CPU time and the kernel killed "
            f"it ({outcome.signal})"
        )
    elif info.get("zygote_died"):
        outcome.error = "the sandbox zygote died during the call; the call was aborted"
    else:
        outcome.error = sentence
    return outcome
