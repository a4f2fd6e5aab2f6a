"""The host side: ``Engine`` (sessions, policy, retries, audit) over the sandbox."""

from engine.config import EngineConfig, RetryPolicy
from engine.engine import Engine, IsolationUnavailable
from engine.policy import ToolPolicy
from sandbox.limits import Limits

__all__ = ["Engine", "EngineConfig", "IsolationUnavailable", "Limits", "RetryPolicy", "ToolPolicy"]
