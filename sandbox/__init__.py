"""Processes and isolation: zygote, hardened single-use workers, frames, limits, seccomp.

The names below are loaded on first use (PEP 562): the zygote imports ``sandbox.zygote`` and
must not pull in the supervisor's side (``WorkerPool``, asyncio), whose memory every worker it
forks would inherit and every fork would copy the page tables of.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e.lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.sandbox.limits import Limits
    from a2e_engine.sandbox.messages import Job
    from a2e_engine.sandbox.pool import PoolConfig, SandboxUnavailable, WorkerPool
    from a2e_engine.sandbox.run import Outcome
    from a2e_engine.sandbox.settings import ZygoteSettings

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
        "Job": "a2e_engine.sandbox.messages",
        "Limits": "a2e_engine.sandbox.limits",
        "Outcome": "a2e_engine.sandbox.run",
        "PoolConfig": "a2e_engine.sandbox.pool",
        "SandboxUnavailable": "a2e_engine.sandbox.pool",
        "WorkerPool": "a2e_engine.sandbox.pool",
        "ZygoteSettings": "a2e_engine.sandbox.settings",
    },
)
