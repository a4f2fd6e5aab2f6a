"""Plugins for ``a2e --plugin`` tests: one whose constructor fails."""

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
