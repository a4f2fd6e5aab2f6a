"""What the supervisor learned about one worker run, before it becomes a protocol result."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["OutcomeStatus", "WorkerOutcome", "describe_exit"]


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
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is OutcomeStatus.OK


_SIGNAL_MEANING = {
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
        name = (
            signal.Signals(signo).name if signo in signal.Signals._value2member_map_ else str(signo)
        )
        meaning = _SIGNAL_MEANING.get(signal.Signals(signo)) if name != str(signo) else None
        return -signo, name, f"the worker {meaning or f'was killed by signal {name}'}"
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return 0, None, "the worker exited without sending a result"
    return code, None, f"the worker exited with code {code} before sending a result"
