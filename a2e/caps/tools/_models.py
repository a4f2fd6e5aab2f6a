"""Wire types of the A2E ``tools`` capability, field for field as in the spec.

Extensions beyond the spec are marked as such: ``ToolCancelRequest`` (cancel a call in flight),
``ToolResult.usage`` (what the sandbox measured) and ``ToolResult.reason`` (why a call failed,
a ``FailureReason``). All are optional for peers: a client that
ignores unknown fields loses nothing.
"""

from __future__ import annotations

import math
import time
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from a2e._messages import A2EEvent, A2EMessage
from a2e.caps.tools._events import EventKind
from a2e.caps.tools._reasons import FailureReason

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EVENT_DATA_MODELS",
    "ArtifactData",
    "EventKind",
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
]

ParameterType = Literal["string", "integer", "number", "boolean", "object", "array", "null"]


class ToolErrorCode(StrEnum):
    UNKNOWN_TOOL = "unknown_tool"
    TOOL_DENIED = "tool_denied"
    TOOL_ERROR = "tool_error"

    @property
    def retryable(self) -> bool:
        """Only a failed execution may succeed on a second try; unknown or denied never will."""
        return self is ToolErrorCode.TOOL_ERROR


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ToolParameter(_Model):
    name: str
    type: ParameterType
    description: str
    required: bool = False
    enum: list[str] | None = None
    properties: dict[str, ToolParameter] | None = None


class ToolDefinition(_Model):
    name: str = Field(min_length=1)
    description: str
    input_parameters: list[ToolParameter] = Field(default_factory=list)
    output_parameters: list[ToolParameter] = Field(default_factory=list)
    streaming: bool = True
    idempotent: bool = False
    tags: list[str] = Field(default_factory=list)
    version: str = "1.0.0"
    toolkit: str | None = None
    defer_loading: bool = False


class ProgressData(_Model):
    pct: int = Field(ge=0, le=100)
    message: str = ""


class StatusData(_Model):
    message: str


class ArtifactData(_Model):
    name: str
    mime: str = "text/plain"
    chunk: str
    final: bool = False


class LogData(_Model):
    level: str
    message: str


EVENT_DATA_MODELS: dict[EventKind, type[_Model]] = {
    EventKind.PROGRESS: ProgressData,
    EventKind.STATUS: StatusData,
    EventKind.ARTIFACT: ArtifactData,
    EventKind.LOG: LogData,
}


class ToolEvent(A2EEvent):
    """A streaming event; ``data`` must have the shape its ``kind`` names."""

    type: Literal["tool/event"] = "tool/event"
    kind: EventKind

    @model_validator(mode="after")
    def _data_matches_kind(self) -> ToolEvent:
        # Every event passes here on each side of each wire: the model's core validator and
        # serializer directly, at half the cost of model_validate(...).model_dump().
        model = EVENT_DATA_MODELS[self.kind]
        checked = model.__pydantic_validator__.validate_python(self.data)
        self.data = model.__pydantic_serializer__.to_python(checked)
        return self


class ToolUsage(_Model):
    """Extension: what the sandbox measured for the call (last attempt for cpu and memory).

    ``cpu_ms`` is user + system time of the worker and the children it waited for;
    ``peak_rss_kb`` is the largest resident set of any of them (``ru_maxrss``); ``signal`` names
    the signal that ended the worker, when one did; ``attempts`` counts retries too;
    ``node_id`` is the Ray node that ran the call, when a ``RayEngine`` placed it.
    """

    attempts: int = 1
    cpu_ms: int | None = None
    peak_rss_kb: int | None = None
    signal: str | None = None
    queued_ms: int | None = None
    node_id: str | None = None


class ToolResult(_Model):
    success: bool
    tool_name: str
    data: Any = None
    summary: Any = None
    truncated: bool = False
    exit_code: int | None = None
    error: str | None = None
    error_code: str | None = None
    duration_ms: int
    events: list[ToolEvent] = Field(default_factory=list)
    usage: ToolUsage | None = None
    reason: str | None = None  # extension: a FailureReason on every failed result

    def model_dump_wire(self) -> dict[str, Any]:
        """Spec fields always; the extensions (``usage``, ``reason``) only when present."""
        absent = {name for name in ("usage", "reason") if getattr(self, name) is None}
        return self.model_dump(mode="json", exclude=absent or None)


class ToolListRequest(A2EMessage):
    type: Literal["tool/list/req"] = "tool/list/req"
    filter_kind: str = ""
    filter_tags: list[str] = Field(default_factory=list)
    query: str = ""
    include_deferred: bool = False


class ToolListResponse(A2EMessage):
    type: Literal["tool/list/resp"] = "tool/list/resp"
    req_id: str = ""
    tools: list[ToolDefinition] = Field(default_factory=list)


#: The spec's default ``timeout`` of a call, in seconds: every client and front-end that has to
#: pick one for its caller picks this.
DEFAULT_TIMEOUT_S = 30


class ToolCallRequest(A2EMessage):
    type: Literal["tool/call/req"] = "tool/call/req"
    session_id: str = ""
    tool_name: str
    arguments: dict[str, Any]
    correlation_id: str = ""
    streaming: bool = False
    timeout: int = DEFAULT_TIMEOUT_S

    @field_validator("timeout", mode="before")
    @classmethod
    def _whole_seconds(cls, value: Any) -> Any:
        """Whole seconds, as the spec's field is an integer; a fraction is rounded up, so that a
        call never gets less time than it asked for (``ToolAPI`` and ``a2e call`` do the same)."""
        if isinstance(value, bool):
            raise ValueError("timeout must be a number of seconds, not a boolean")
        if isinstance(value, float) and math.isfinite(value):
            return math.ceil(value)
        return value

    @field_validator("timeout")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        return value


class ToolCallResponse(A2EMessage):
    type: Literal["tool/call/resp"] = "tool/call/resp"
    req_id: str = ""
    data: ToolResult
    created_at: float = Field(default_factory=time.time)


class ToolCancelRequest(A2EMessage):
    """Extension: end the call ``req_id`` of this session as if its timeout had expired."""

    type: Literal["tool/cancel/req"] = "tool/cancel/req"
    session_id: str = ""
    req_id: str
