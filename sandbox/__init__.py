"""Processes and isolation: zygote, hardened single-use workers, frames, limits, seccomp."""

from sandbox.limits import Limits
from sandbox.outcome import OutcomeStatus, WorkerOutcome
from sandbox.pool import Job, PoolConfig, SandboxUnavailable, WorkerPool

__all__ = [
    "Job",
    "Limits",
    "OutcomeStatus",
    "PoolConfig",
    "SandboxUnavailable",
    "WorkerOutcome",
    "WorkerPool",
]
