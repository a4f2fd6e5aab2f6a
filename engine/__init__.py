"""The host side: ``Engine`` (sessions, policy, retries, audit) over the sandbox, and
``RayEngine``, an engine on every node of a Ray cluster.

Each name is imported when first used (``a2e._lazy``): importing one module of the package
(the CLI's, the service's configuration) does not bring in the engine, the cluster and Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.engine._config import (
        Admission,
        EngineConfig,
        Isolation,
        OutputCaps,
        ResidentLimits,
        RetryPolicy,
    )
    from a2e_engine.engine._config_file import ConfigError, ConfigFile, load_config_file
    from a2e_engine.engine._engine import Engine
    from a2e_engine.engine._host import Host, HostClosed, HostConnection
    from a2e_engine.engine._plugins import PluginError, entry_point_plugins
    from a2e_engine.engine._policy import ToolPolicy
    from a2e_engine.engine._requirements import IsolationUnavailable, LimitTooLow
    from a2e_engine.engine.cluster import RayEngine
    from a2e_engine.sandbox._limits import Limits

__all__ = [
    "Admission",
    "ConfigError",
    "ConfigFile",
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
    "PluginError",
    "RayEngine",
    "ResidentLimits",
    "RetryPolicy",
    "ToolPolicy",
    "entry_point_plugins",
    "load_config_file",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "Admission": "a2e_engine.engine._config",
        **dict.fromkeys(
            ("ConfigError", "ConfigFile", "load_config_file"), "a2e_engine.engine._config_file"
        ),
        **dict.fromkeys(("PluginError", "entry_point_plugins"), "a2e_engine.engine._plugins"),
        "Engine": "a2e_engine.engine._engine",
        "EngineConfig": "a2e_engine.engine._config",
        "Host": "a2e_engine.engine._host",
        "HostClosed": "a2e_engine.engine._host",
        "HostConnection": "a2e_engine.engine._host",
        "Isolation": "a2e_engine.engine._config",
        "IsolationUnavailable": "a2e_engine.engine._requirements",
        "LimitTooLow": "a2e_engine.engine._requirements",
        "Limits": "a2e_engine.sandbox._limits",
        "OutputCaps": "a2e_engine.engine._config",
        "RayEngine": "a2e_engine.engine.cluster",
        "ResidentLimits": "a2e_engine.engine._config",
        "RetryPolicy": "a2e_engine.engine._config",
        "ToolPolicy": "a2e_engine.engine._policy",
    },
)
