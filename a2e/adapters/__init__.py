"""Host-side adapters: the engine's tools in the shapes other agent frameworks expect, and what
a client needs of SandboxFusion's names (``verl``, the reward drop-in, is a module of its own:
the file verl's configuration names)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e.adapters._llm_agents import EngineTool, ToolCallResult, engine_tools
    from a2e.adapters._sandbox_fusion_languages import (
        SANDBOX_FUSION_LANGUAGES,
        SANDBOX_FUSION_NOT_SERVED,
    )

__all__ = [
    "SANDBOX_FUSION_LANGUAGES",
    "SANDBOX_FUSION_NOT_SERVED",
    "EngineTool",
    "ToolCallResult",
    "engine_tools",
]

__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            ["EngineTool", "ToolCallResult", "engine_tools"], "a2e.adapters._llm_agents"
        ),
        **dict.fromkeys(
            ["SANDBOX_FUSION_LANGUAGES", "SANDBOX_FUSION_NOT_SERVED"],
            "a2e.adapters._sandbox_fusion_languages",
        ),
    },
)
