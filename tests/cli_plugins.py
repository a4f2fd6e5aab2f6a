"""Plugins for ``a2e --plugin`` tests: one whose constructor fails; one with a deferred tool."""

from __future__ import annotations

from typing import Any

from a2e.caps.tools.models import ToolDefinition
from a2e.caps.tools.plugin import ToolPlugin


class FailsToBuild(ToolPlugin):
    name = "fails_to_build"

    def __init__(self) -> None:
        raise RuntimeError("its settings file is missing")

    def _list_tools(self) -> list[ToolDefinition]:
        return []

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return None


class DeferredHelpers(ToolPlugin):
    """A tool listed only when asked for (``defer_loading``), which tells what it does as it
    goes: a status line, a log message and progress."""

    name = "deferred_helpers"

    def _list_tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name="convert_units",
                description="convert a length between metres and feet",
                defer_loading=True,
                tags=["units"],
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.emit("status", {"message": "looking up the factor"})
        self.emit("log", {"level": "warning", "message": "feet are approximate"})
        self.emit("progress", {"pct": 100, "message": "done"})
        return {"feet_per_metre": 3.28084}
