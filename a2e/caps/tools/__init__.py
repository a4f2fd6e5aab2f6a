"""The ``tools`` capability: wire models, plugin contract and client API."""

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
