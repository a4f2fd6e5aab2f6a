"""The host side: ``Engine`` (sessions, policy, retries, audit) over the sandbox."""

from a2e_engine.engine.config import EngineConfig, RetryPolicy
from a2e_engine.engine.engine import Engine, IsolationUnavailable
from a2e_engine.engine.policy import ToolPolicy
from a2e_engine.sandbox.limits import Limits

__all__ = ["Engine", "EngineConfig", "IsolationUnavailable", "Limits", "RetryPolicy", "ToolPolicy"]
