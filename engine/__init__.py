"""The host side: ``Engine`` (sessions, policy, retries, audit) over the sandbox, and
``RayEngine``, an engine on every node of a Ray cluster."""

from a2e_engine.engine.cluster import RayEngine
from a2e_engine.engine.config import EngineConfig, RetryPolicy
from a2e_engine.engine.engine import Engine
from a2e_engine.engine.host import Host, HostClosed, HostConnection
from a2e_engine.engine.policy import ToolPolicy
from a2e_engine.engine.requirements import IsolationUnavailable, LimitTooLow
from a2e_engine.sandbox.limits import Limits

__all__ = [
    "Engine",
    "EngineConfig",
    "Host",
    "HostClosed",
    "HostConnection",
    "IsolationUnavailable",
    "LimitTooLow",
    "Limits",
    "RayEngine",
    "RetryPolicy",
    "ToolPolicy",
]
