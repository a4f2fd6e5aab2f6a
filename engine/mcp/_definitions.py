"""What the engine's tools and their results are to an MCP client.

A tool's ``inputSchema`` is the JSON Schema every other door gives it
(``a2e.caps.tools._schema``). Its annotations say what the engine knows: ``idempotentHint``
from ``idempotent``, ``readOnlyHint`` for a tool tagged ``read`` (and not ``write``), and
``openWorldHint`` true only for a tool tagged ``network``: every other tool runs with no
network at all. A result is ``structuredContent`` (the tool's data; an object, so data of any
other shape comes as ``{"value": data}``) plus one text block (its summary, or the data as
JSON); a failure is ``isError`` with its reason and message as text, and its error code,
reason (``FailureReason``) and message as structured content.
"""

from __future__ import annotations

from typing import Any

from mcp import types

from a2e import _jsonwire as jsonwire
from a2e.caps.tools._models import ToolDefinition, ToolResult
from a2e.caps.tools._schema import input_schema

__all__ = ["mcp_failure", "mcp_result", "mcp_tool"]


def mcp_tool(tool: ToolDefinition) -> types.Tool:
    read_only = "read" in tool.tags and "write" not in tool.tags
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=input_schema(tool),
        annotations=types.ToolAnnotations(
            read_only_hint=True if read_only else None,
            idempotent_hint=tool.idempotent,
            open_world_hint="network" in tool.tags,
        ),
    )


def mcp_result(result: ToolResult) -> types.CallToolResult:
    if result.success:
        structured = result.data if isinstance(result.data, dict) else {"value": result.data}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_text(result.summary, result.data))],
            structured_content=structured,
            is_error=False,
        )
    extra: dict[str, Any] = {}
    if result.exit_code is not None:
        extra["exit_code"] = result.exit_code
    if result.data is not None:
        extra["data"] = result.data
    return mcp_failure(result.error_code, result.error, result.reason, extra)


def mcp_failure(
    code: str | None,
    message: str | None,
    reason: str | None,
    extra: dict[str, Any] | None = None,
) -> types.CallToolResult:
    """A failed call: ``reason: message`` as text (the reason says more than the spec's code),
    and code, reason and message (with ``extra``) structured."""
    structured = {"error_code": code, "reason": reason, "error": message, **(extra or {})}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{reason or code}: {message}")],
        structured_content=structured,
        is_error=True,
    )


def _text(summary: Any, data: Any) -> str:
    if isinstance(summary, str) and summary:
        return summary
    return jsonwire.dumps(data if summary is None else summary)
