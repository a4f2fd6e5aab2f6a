"""The ``tools`` capability: wire models, plugin contract and client API.

The models are imported when first named, not with the package: a sandbox worker imports
``a2e.caps.tools.plugin`` and must not pay for pydantic (see ``a2e.caps.tools.events``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e.lazy import lazy_exports

if TYPE_CHECKING:
    from a2e.caps.tools.endings import CallEnding
    from a2e.caps.tools.models import (
        FailureReason,
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
    "CallEnding",
    "FailureReason",
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


__getattr__ = lazy_exports(
    __name__,
    {**dict.fromkeys(__all__, "a2e.caps.tools.models"), "CallEnding": "a2e.caps.tools.endings"},
)
