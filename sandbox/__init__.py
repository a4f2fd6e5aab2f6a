"""Processes and isolation: zygote, hardened single-use workers, frames, limits, seccomp.

The names below are loaded on first use (PEP 562): the zygote imports ``sandbox.zygote`` and
must not pull in the supervisor's side (``WorkerPool``, asyncio), whose memory every worker it
forks would inherit and every fork would copy the page tables of.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

_HOMES = {
    "Limits": "a2e_engine.sandbox.limits",
    "Outcome": "a2e_engine.sandbox.run",
    "Job": "a2e_engine.sandbox.messages",
    "PoolConfig": "a2e_engine.sandbox.pool",
    "SandboxUnavailable": "a2e_engine.sandbox.pool",
    "WorkerPool": "a2e_engine.sandbox.pool",
    "ZygoteSettings": "a2e_engine.sandbox.settings",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
