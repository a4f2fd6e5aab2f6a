"""The ``tools`` capability: wire models, the plugin contract and the client API.

Each name is imported when first used, not with the package: a sandbox worker imports the
plugin contract (``ToolPlugin``, ``ToolContext``) and must not pay for the models and the
clients (pydantic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e.caps.tools._async_client import AsyncPendingCall, AsyncToolAPI
    from a2e.caps.tools._client import PendingCall, ToolAPI
    from a2e.caps.tools._events import EventKind
    from a2e.caps.tools._models import (
        DEFAULT_TIMEOUT_S,
        ArtifactData,
        FailureReason,
        LogData,
        ParameterType,
        ProgressData,
        StatusData,
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
        ToolUsage,
    )
    from a2e.caps.tools._plugin import (
        SandboxProfile,
        ToolCancelled,
        ToolContext,
        ToolExecutionError,
        ToolPlugin,
    )
    from a2e.caps.tools._reasons import ENDED_BY_WHAT_RAN
    from a2e.caps.tools._schema import anthropic_tool, input_schema, openai_tool

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ENDED_BY_WHAT_RAN",
    "ArtifactData",
    "AsyncPendingCall",
    "AsyncToolAPI",
    "EventKind",
    "FailureReason",
    "LogData",
    "ParameterType",
    "PendingCall",
    "ProgressData",
    "SandboxProfile",
    "StatusData",
    "ToolAPI",
    "ToolCallRequest",
    "ToolCallResponse",
    "ToolCancelRequest",
    "ToolCancelled",
    "ToolContext",
    "ToolDefinition",
    "ToolErrorCode",
    "ToolEvent",
    "ToolExecutionError",
    "ToolListRequest",
    "ToolListResponse",
    "ToolParameter",
    "ToolPlugin",
    "ToolResult",
    "ToolUsage",
    "anthropic_tool",
    "input_schema",
    "openai_tool",
]

_MODELS = (
    "DEFAULT_TIMEOUT_S",
    "ArtifactData",
    "FailureReason",
    "LogData",
    "ParameterType",
    "ProgressData",
    "StatusData",
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
    "ToolUsage",
)
_CONTRACT = ("SandboxProfile", "ToolCancelled", "ToolContext", "ToolExecutionError", "ToolPlugin")
_SCHEMA = ("anthropic_tool", "input_schema", "openai_tool")

__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(_MODELS, "a2e.caps.tools._models"),
        **dict.fromkeys(_CONTRACT, "a2e.caps.tools._plugin"),
        **dict.fromkeys(("AsyncPendingCall", "AsyncToolAPI"), "a2e.caps.tools._async_client"),
        **dict.fromkeys(("PendingCall", "ToolAPI"), "a2e.caps.tools._client"),
        **dict.fromkeys(
            ("anthropic_tool", "input_schema", "openai_tool"), "a2e.caps.tools._schema"
        ),
        "EventKind": "a2e.caps.tools._events",
        "ENDED_BY_WHAT_RAN": "a2e.caps.tools._reasons",
    },
)
