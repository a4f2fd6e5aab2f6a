"""Finding and building tool plugins: ``module:Class`` specs, the ``a2e.tools`` entry-point
group, and per-plugin settings checked against what the plugin accepts.

A plugin takes its settings as keyword arguments of its constructor; a setting it does not
accept is an error that names it (``tools.http.alow: unknown setting; known: allow, ...``).
Third-party plugins found through entry points that fail to import or to build are reported
and skipped: one broken package must not take the others down.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from a2e.caps.tools._plugin import ToolPlugin

__all__ = ["ENTRY_POINT_GROUP", "PluginError", "build_plugin", "entry_point_plugins", "load_plugin"]

ENTRY_POINT_GROUP = "a2e.tools"
log = logging.getLogger("a2e.engine")


class PluginError(ValueError):
    """A plugin could not be found or built; the message says which and why."""


def build_plugin(cls: type[ToolPlugin], settings: Mapping[str, Any], where: str) -> ToolPlugin:
    """``cls(**settings)``, each setting checked against the constructor first."""
    accepted = {
        name
        for name, parameter in inspect.signature(cls).parameters.items()
        if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    }
    for key in settings:
        if key not in accepted:
            known = ", ".join(sorted(accepted)) or "none"
            raise PluginError(f"{where}.{key}: unknown setting; known: {known}")
    try:
        return cls(**settings)
    except (TypeError, ValueError) as exc:
        raise PluginError(f"{where}: {exc}") from None
    except Exception as exc:  # the plugin's own code: whatever it raises is its failure to build
        raise PluginError(f"{where}: could not be built: {type(exc).__name__}: {exc}") from None


def load_plugin(spec: str, settings: Mapping[str, Any] | None = None) -> ToolPlugin:
    """``module:Class`` -> an instance; errors say which part was wrong."""
    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise PluginError(f"a plugin is named module:Class, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise PluginError(f"cannot import plugin module {module_name!r}: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, ToolPlugin)):
        raise PluginError(f"{spec!r} is not a ToolPlugin class")
    return build_plugin(cls, settings or {}, f"plugin {spec}")


def entry_point_plugins(
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[list[ToolPlugin], list[str]]:
    """Every plugin registered under ``a2e.tools``, and one problem per plugin that failed."""
    settings = settings or {}
    plugins: list[ToolPlugin] = []
    problems: list[str] = []
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        where = f"entry point {entry.name} ({entry.value})"
        try:
            cls = entry.load()
            if not (isinstance(cls, type) and issubclass(cls, ToolPlugin)):
                raise PluginError(f"{entry.value} is not a ToolPlugin class")
            plugins.append(build_plugin(cls, settings.get(entry.name, {}), f"tools.{entry.name}"))
        except Exception as exc:
            problem = f"{where} skipped: {exc}"
            log.warning("%s", problem)
            problems.append(problem)
    return plugins, problems
