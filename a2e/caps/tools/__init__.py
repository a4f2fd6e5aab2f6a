"""The ``tools`` capability: wire models, plugin contract and client API.

The models are imported when first named, not with the package: a sandbox worker imports
``a2e.caps.tools.plugin`` and must not pay for pydantic (see ``a2e.caps.tools.events``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from a2e.caps.tools.models import (
        ToolCallRequest,
        ToolCallResponse,
        ToolCancelRequest,
        ToolDefinition,
        ToolErrorCode,
        ToolEvent,
        ToolListRequest,
        ToolListResponse,
        ToolParameter,
        ToolResult,
    )

__all__ = [
    "ToolCallRequest",
    "ToolCallResponse",
    "ToolCancelRequest",
    "ToolDefinition",
    "ToolErrorCode",
    "ToolEvent",
    "ToolListRequest",
    "ToolListResponse",
    "ToolParameter",
    "ToolResult",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("a2e.caps.tools.models"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
