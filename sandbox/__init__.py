"""Processes and isolation: zygote, hardened single-use workers, frames, limits, seccomp.

The names below are loaded on first use (PEP 562): the zygote imports ``sandbox.zygote`` and
must not pull in the supervisor's side (``WorkerPool``, asyncio), whose memory every worker it
forks would inherit and every fork would copy the page tables of.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "Limits": "sandbox.limits",
    "OutcomeStatus": "sandbox.outcome",
    "WorkerOutcome": "sandbox.outcome",
    "Job": "sandbox.pool",
    "PoolConfig": "sandbox.pool",
    "SandboxUnavailable": "sandbox.pool",
    "WorkerPool": "sandbox.pool",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
