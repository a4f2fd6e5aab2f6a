"""Processes and isolation: zygote, hardened single-use workers, frames, limits, seccomp.

The names below are loaded on first use (PEP 562): the zygote imports ``sandbox._zygote`` and
must not pull in the supervisor's side (``WorkerPool``, asyncio), whose memory every worker it
forks would inherit and every fork would copy the page tables of.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.sandbox._limits import Limits
    from a2e_engine.sandbox._messages import Job
    from a2e_engine.sandbox._pool import PoolConfig, SandboxUnavailable, WorkerPool
    from a2e_engine.sandbox._run import Outcome
    from a2e_engine.sandbox._settings import ZygoteSettings

__all__ = [
    "Job",
    "Limits",
    "Outcome",
    "PoolConfig",
    "SandboxUnavailable",
    "WorkerPool",
    "ZygoteSettings",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "Job": "a2e_engine.sandbox._messages",
        "Limits": "a2e_engine.sandbox._limits",
        "Outcome": "a2e_engine.sandbox._run",
        "PoolConfig": "a2e_engine.sandbox._pool",
        "SandboxUnavailable": "a2e_engine.sandbox._pool",
        "WorkerPool": "a2e_engine.sandbox._pool",
        "ZygoteSettings": "a2e_engine.sandbox._settings",
    },
)
