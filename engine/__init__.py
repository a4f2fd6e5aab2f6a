"""The host side: ``Engine`` (sessions, policy, retries, audit) over the sandbox, and
``RayEngine``, an engine on every node of a Ray cluster.

Each name is imported when first used (``a2e.lazy``): importing one module of the package
(the CLI's, the service's configuration) does not bring in the engine, the cluster and Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e.lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.engine.cluster import RayEngine
    from a2e_engine.engine.config import (
        Admission,
        EngineConfig,
        Isolation,
        OutputCaps,
        ResidentLimits,
        RetryPolicy,
    )
    from a2e_engine.engine.engine import Engine
    from a2e_engine.engine.host import Host, HostClosed, HostConnection
    from a2e_engine.engine.policy import ToolPolicy
    from a2e_engine.engine.requirements import IsolationUnavailable, LimitTooLow
    from a2e_engine.sandbox.limits import Limits

__all__ = [
    "Admission",
    "Engine",
    "EngineConfig",
    "Host",
    "HostClosed",
    "HostConnection",
    "Isolation",
    "IsolationUnavailable",
    "LimitTooLow",
    "Limits",
    "OutputCaps",
    "RayEngine",
    "ResidentLimits",
    "RetryPolicy",
    "ToolPolicy",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "Admission": "a2e_engine.engine.config",
        "Engine": "a2e_engine.engine.engine",
        "EngineConfig": "a2e_engine.engine.config",
        "Host": "a2e_engine.engine.host",
        "HostClosed": "a2e_engine.engine.host",
        "HostConnection": "a2e_engine.engine.host",
        "Isolation": "a2e_engine.engine.config",
        "IsolationUnavailable": "a2e_engine.engine.requirements",
        "LimitTooLow": "a2e_engine.engine.requirements",
        "Limits": "a2e_engine.sandbox.limits",
        "OutputCaps": "a2e_engine.engine.config",
        "RayEngine": "a2e_engine.engine.cluster",
        "ResidentLimits": "a2e_engine.engine.config",
        "RetryPolicy": "a2e_engine.engine.config",
        "ToolPolicy": "a2e_engine.engine.policy",
    },
)
