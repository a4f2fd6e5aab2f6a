"""Answers the service's HTTP endpoints share: strict JSON, the host's refusals as HTTP
statuses, and a call's result unless the client left first (then its call is cancelled)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from a2e import _jsonwire as jsonwire
from a2e._messages import ErrorCode
from a2e.caps.tools._models import ToolCallRequest, ToolResult
from a2e_engine.engine._host import HostSession, Refused
from a2e_engine.engine._kept_output import OutputKeeper
from a2e_engine.engine.service._bodies import error_response, until_disconnected

__all__ = [
    "OTHER_REFUSAL_STATUS",
    "REFUSAL_STATUS",
    "json_response",
    "refusal_response",
    "result_or_gone",
    "with_the_request_ended",
]

#: How the host's refusals read over HTTP.
REFUSAL_STATUS: dict[str, int] = {
    ErrorCode.OVERLOADED: 429,
    ErrorCode.MESSAGE_TOO_LARGE: 413,
    ErrorCode.INVALID_MESSAGE: 400,
    ErrorCode.UNAUTHORIZED: 401,
}
#: Any other refusal (``internal_error``): the engine's fault, not the request's.
OTHER_REFUSAL_STATUS = 500
#: Where the whole of a capped stream went, over HTTP: the file its marker named was in the
#: request's session, and on the server besides.
NOT_KEPT_OVER_HTTP = (
    "not kept: it was in the request's session, which ended with the request (a WebSocket or "
    "MCP session keeps it while the session lasts)"
)


def with_the_request_ended(result: ToolResult) -> ToolResult:
    """``result`` as a client of a one-request session reads it: a capped stream's marker and
    ``<stream>_path`` would name a file on the server that is gone with the session."""
    if result.data is None:
        return result
    keeper = OutputKeeper(result.tool_name, None, None, not_kept=NOT_KEPT_OVER_HTTP)
    return result.model_copy(update={"data": keeper.rewrite(result.data)})


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """Strict JSON (no NaN), the same encoder as every other wire of ours."""
    return Response(jsonwire.dumps(value), status, headers, media_type="application/json")


def refusal_response(refused: Refused) -> Response:
    status = REFUSAL_STATUS.get(refused.error.code, OTHER_REFUSAL_STATUS)
    headers = {"Retry-After": "1"} if status == 429 else None
    return error_response(status, refused.error.code, refused.error.message, headers)


async def result_or_gone(
    request: Request, session: HostSession, call: ToolCallRequest
) -> ToolResult | None:
    """The call's result; ``None`` if the client went away first (its call is cancelled)."""

    async def until_result() -> ToolResult:
        async for batch in session.call(call):
            last = batch[-1]
            if isinstance(last, ToolResult):
                return last
        raise RuntimeError("the call ended without a result")

    result = asyncio.ensure_future(until_result())
    gone = asyncio.ensure_future(until_disconnected(request))
    try:
        await asyncio.wait((result, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if result.done():
        return with_the_request_ended(result.result())
    result.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await result
    return None
