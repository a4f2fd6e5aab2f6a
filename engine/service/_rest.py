"""REST for tools: ``GET /v1/tools`` (list and search) and ``POST /v1/tools/{tool_name}``
(``{"arguments": {...}, "timeout": 30}`` to the ``ToolResult``; with ``Accept:
text/event-stream`` the call's ``tool/event``s as server-sent events, then ``result``).

Each request is a session of the host's of its own (``Host.open_session``, one prepared ahead),
ended with the request.
A result is 200 whatever the tool did (``success``, ``error_code`` and ``reason`` say), but
400 for arguments that do not fit the tool, 403 for a denied tool and 404 for an unknown one
(``RESULT_STATUS``, the ``ToolResult`` as the body each time); the host turning a call away is
429 with ``Retry-After``. A client that leaves before its result has its call cancelled.

The query (``ToolListQuery``) and the body (``CallBody``) are read strictly by their models,
which ``/openapi.json`` is built from.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.background import BackgroundTask
from starlette.convertors import PathConvertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from a2e import _jsonwire as jsonwire
from a2e._codec import describe_validation_error, encode
from a2e.caps.tools._models import (
    DEFAULT_TIMEOUT_S,
    FailureReason,
    ToolCallRequest,
    ToolDefinition,
    ToolEvent,
    ToolListRequest,
    ToolResult,
)
from a2e_engine.engine._host import HostSession, Refused
from a2e_engine.engine.service._auth import tenant_of
from a2e_engine.engine.service._bodies import STRICT, BadRequest, read_model, read_query
from a2e_engine.engine.service._responses import (
    json_response,
    with_the_request_ended,
)
from a2e_engine.engine.service._state import ServiceState

__all__ = ["RESULT_STATUS", "CallBody", "ToolList", "ToolListQuery", "rest_routes"]

#: Failures that are the request's fault rather than the tool's, by their reason.
RESULT_STATUS: dict[str | None, int] = {
    FailureReason.INVALID_ARGUMENTS: 400,
    FailureReason.POLICY_DENIED: 403,
    FailureReason.UNKNOWN_TOOL: 404,
}


class _AnyName(PathConvertor):
    """A path parameter as sent, whatever it holds: a tool's name is any string, so a newline or a
    slash (``%2F`` arrives decoded) must reach the handler rather than miss the route."""

    regex = r"[\s\S]*"


register_url_convertor("any_name", _AnyName())


class ToolListQuery(BaseModel):
    model_config = STRICT

    query: str = Field("", description="search the tools for this (BM25) instead of listing")
    tags: list[str] = Field(
        [], description="only tools with all of these tags (each value may list several: a,b)"
    )
    kind: str = Field("", description="only tools of this kind")
    include_deferred: bool = Field(False, description="search the deferred tools too")


class ToolList(BaseModel):
    tools: list[ToolDefinition]


class CallBody(BaseModel):
    model_config = ConfigDict(**STRICT, extra="forbid")

    arguments: dict[str, Any] = Field({}, description="as the tool's input_parameters say")
    timeout: float = Field(
        DEFAULT_TIMEOUT_S,
        gt=0,
        description="seconds (rounded up; the engine's max_timeout caps it)",
    )
    correlation_id: str = ""


def _call_request(tool_name: str, body: CallBody, streaming: bool) -> ToolCallRequest:
    try:
        return ToolCallRequest(
            tool_name=tool_name,
            arguments=body.arguments,
            timeout=body.timeout,  # type: ignore[arg-type]  # rounded up by the model
            correlation_id=body.correlation_id,
            streaming=streaming,
        )
    except ValidationError as exc:
        raise BadRequest(400, "invalid_request", describe_validation_error(exc)) from None


def rest_routes(state: ServiceState) -> list[Route]:
    host, config = state.host, state.config

    async def list_tools(request: Request) -> Response:
        try:
            asked = read_query(request.query_params, ToolListQuery)
        except BadRequest as exc:
            state.metrics.reject(exc.error)
            return exc.response()
        listing = ToolListRequest(
            query=asked.query,
            include_deferred=asked.include_deferred,
            filter_tags=[tag for value in asked.tags for tag in value.split(",") if tag],
            filter_kind=asked.kind,
        )
        try:
            session = await host.open_session(
                "rest", stateless=True, tenant=tenant_of(request.scope)
            )
        except Refused as exc:
            return state.refusal(exc)
        try:
            reply = await session.list_tools(listing)
        except Refused as exc:
            return state.refusal(exc)
        finally:
            session.close()
        return json_response(ToolList(tools=reply.tools).model_dump(mode="json"))

    async def call_tool(request: Request) -> Response:
        try:
            body = await read_model(
                request, CallBody, config.max_message_bytes, config.request_timeout_s, state.bodies
            )
            streaming = "text/event-stream" in request.headers.get("accept", "")
            call = _call_request(request.path_params["tool_name"], body, streaming)
        except BadRequest as exc:
            state.metrics.reject(exc.error)
            return exc.response()
        if not streaming:
            answer = await state.call_once(request, "rest", call)
            if isinstance(answer, Response):
                return answer
            return json_response(answer.model_dump_wire(), RESULT_STATUS.get(answer.reason, 200))
        try:
            session = await host.open_session(
                "rest", stateless=True, tenant=tenant_of(request.scope)
            )
        except Refused as exc:
            return state.refusal(exc)
        # Closed after the response however it ends, even if the stream never started.
        return StreamingResponse(
            _server_sent_events(state, session, call),
            media_type="text/event-stream",
            background=BackgroundTask(session.close),
        )

    return [
        Route("/v1/tools", list_tools, methods=["GET"]),
        Route("/v1/tools/{tool_name:any_name}", call_tool, methods=["POST"]),
    ]


def _server_sent_event(state: ServiceState, message: ToolEvent | ToolResult) -> str:
    if isinstance(message, ToolEvent):
        return f"event: tool/event\ndata: {encode(message)}\n\n"
    state.metrics.observe(message)
    result = with_the_request_ended(message)
    return f"event: result\ndata: {jsonwire.dumps(result.model_dump_wire())}\n\n"


async def _server_sent_events(
    state: ServiceState, session: HostSession, call: ToolCallRequest
) -> AsyncIterator[str]:
    try:
        # A burst of events goes out as one chunk: one write, one wake-up of the client.
        async for batch in session.call(call):
            yield "".join(_server_sent_event(state, message) for message in batch)
    except Refused as exc:
        state.count_refusal(exc)
        error = {"error": exc.error.code, "message": exc.error.message}
        yield f"event: error\ndata: {jsonwire.dumps(error)}\n\n"
    finally:
        session.close()
