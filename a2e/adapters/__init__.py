"""Host-side adapters: the engine's tools in the shapes other agent frameworks expect."""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e.adapters._llm_agents import EngineTool, ToolCallResult, engine_tools

__all__ = ["EngineTool", "ToolCallResult", "engine_tools"]

__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "a2e.adapters._llm_agents"))
