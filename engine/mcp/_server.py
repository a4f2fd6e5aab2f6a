"""The engine's tools as an MCP server, on the official SDK's low-level ``Server``.

Each MCP request goes through a session of the host's (``engine._host.HostSession``), like
every other door: ``tools/list`` is the engine's list after policy, and ``tools/call`` is a
streaming ``tool/call`` with its validation, policy, retries, timeout and fresh worker. Its
events are relayed as they come (``engine.mcp._events``), its result is mapped by
``engine.mcp._definitions``, and a client's ``notifications/cancelled`` (which the SDK turns
into a cancellation of the handler) cancels the call and kills its worker.

Deferred tools are not listed. The list carries one more tool, ``search_tools``, which
returns the definitions (deferred ones included) that match a query: how an MCP host finds
them, and how it searches a large catalog. Any tool, listed or not, is called by its name.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from a2e._messages import ErrorCode
from a2e.caps.tools._models import (
    DEFAULT_TIMEOUT_S,
    FailureReason,
    ToolCallRequest,
    ToolErrorCode,
    ToolEvent,
    ToolListRequest,
    ToolResult,
)
from a2e_engine.engine._host import HostSession, Refused
from a2e_engine.engine.mcp._definitions import mcp_failure, mcp_result, mcp_tool
from a2e_engine.engine.mcp._events import EventRelay

__all__ = ["SEARCH_TOOL", "SessionFor", "build_server"]

log = logging.getLogger("a2e.mcp")

#: How a server finds the engine session a request belongs to, for the time of the request.
SessionFor = Callable[
    [ServerRequestContext[Any]], contextlib.AbstractAsyncContextManager[HostSession]
]

SEARCH_TOOL = "search_tools"

_SEARCH_DEFINITION = types.Tool(
    name=SEARCH_TOOL,
    description=(
        "Find tools by what they do, including tools not listed until asked for: returns the "
        "definitions (name, description, inputSchema) that match the query, best first. Call "
        "a tool it returns by its name."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what the tool should do"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "all of these"},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(
        read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)


def build_server(
    session_for: SessionFor, version: str, call_timeout_s: float = DEFAULT_TIMEOUT_S
) -> Server[Any]:
    """``call_timeout_s``: each call's timeout (an MCP request has no field for one)."""
    schemas: dict[str, dict[str, Any]] = {}  # by name, as last listed
    engine_names: set[str] = set()  # the engine's own tools, as last listed

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        async with session_for(ctx) as session:
            listed = await session.list_tools(ToolListRequest())
        tools = [mcp_tool(tool) for tool in listed.tools]
        engine_names.clear()
        engine_names.update(tool.name for tool in tools)
        if SEARCH_TOOL not in engine_names:
            tools.append(_SEARCH_DEFINITION)
        schemas.update({tool.name: tool.input_schema for tool in tools})
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            async with session_for(ctx) as session:
                if params.name == SEARCH_TOOL and SEARCH_TOOL not in engine_names:
                    return await _search(session, params.arguments or {})
                arguments = params.arguments or {}
                return await _call(ctx, session, params.name, arguments, call_timeout_s)
        except Refused as exc:
            overloaded = exc.error.code == ErrorCode.OVERLOADED
            why = FailureReason.OVERLOADED if overloaded else FailureReason.PROTOCOL_ERROR
            return mcp_failure(exc.error.code, exc.error.message, why)
        except Exception:
            # The SDK would send the exception's text to the client; it gets one line instead.
            log.exception("MCP call of %r failed", params.name)
            return mcp_failure(
                ErrorCode.INTERNAL,
                "the engine could not run this call; see its log",
                FailureReason.PROTOCOL_ERROR,
            )

    return Server(
        "a2e-engine",
        version=version,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _call(
    ctx: ServerRequestContext[Any],
    session: HostSession,
    name: str,
    arguments: dict[str, Any],
    timeout: float,
) -> types.CallToolResult:
    request = ToolCallRequest(
        tool_name=name,
        arguments=arguments,
        streaming=True,
        timeout=timeout,  # type: ignore[arg-type]  # a float, rounded up by the model
    )
    relay = EventRelay(ctx, name)
    # A client's cancel cancels this task: leaving ``call`` early cancels the call, and its
    # worker goes with it.
    async for batch in session.call(request):
        await relay.forward([message for message in batch if isinstance(message, ToolEvent)])
        last = batch[-1]
        if isinstance(last, ToolResult):  # the result ends its batch
            return mcp_result(last)
    raise RuntimeError("the call ended without a result")


async def _search(session: HostSession, arguments: dict[str, Any]) -> types.CallToolResult:
    query, tags = arguments.get("query"), arguments.get("tags", [])
    if not isinstance(query, str) or not isinstance(tags, list):
        return mcp_failure(
            ToolErrorCode.TOOL_ERROR,
            "search_tools takes a query (a string) and tags",
            FailureReason.INVALID_ARGUMENTS,
        )
    listed = await session.list_tools(
        ToolListRequest(query=query, filter_tags=[str(t) for t in tags], include_deferred=True)
    )
    found = [
        mcp_tool(tool).model_dump(mode="json", by_alias=True, exclude_none=True)
        for tool in listed.tools
    ]
    names = ", ".join(tool["name"] for tool in found) or "no tool matches"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=names)],
        structured_content={"tools": found},
        is_error=False,
    )
